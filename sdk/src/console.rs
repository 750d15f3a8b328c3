//! Console output, through DomainZero's console fast portal.

/// Writes one line to the system console; the kernel prefixes it with the domain's name.
pub fn write_line(line: &str) {
    domos_sys::console_write(line.as_bytes());
}

/// Formats and writes one line to the system console.
#[macro_export]
macro_rules! println {
    ($($arg:tt)*) => {
        $crate::console::write_line(&::alloc::format!($($arg)*))
    };
}
