//! The console, the clock and the component's arguments.

use super::{Ctx, code};
use crate::object::guest_memory::{self};

pub(super) fn console_write(c: Ctx<'_>, ptr: u32, len: u32) {
    let ctx = c.data();
    if let Ok(text) = guest_memory::read_str(&ctx.instance.memory, ptr, len.min(4096), 4096) {
        ctx.kernel.console.line(&ctx.domain.name, &text);
    }
}

pub(super) fn clock_ns(c: Ctx<'_>) -> i64 {
    c.data().kernel.clock_ns() as i64
}

pub(super) fn args(c: Ctx<'_>, ptr: u32, cap: u32) -> i64 {
    let ctx = c.data();
    let args = &ctx.part().args;
    let take = args.len().min(cap as usize);
    code(guest_memory::write(&ctx.instance.memory, ptr, &args[..take]).map(|()| args.len() as i64))
}

#[cfg(test)]
mod tests {
    use domos_abi::HostError;

    use crate::test_system::{System, component, main};

    #[test]
    fn console_lines_args_and_the_clock() {
        let body = format!(
            r#"(data (i32.const 1024) "hello, console") (data (i32.const 1100) "\ff\fe") {}"#,
            main(
                "(call $console_write (i32.const 1024) (i32.const 14))
                 (call $console_write (i32.const 1100) (i32.const 2))
                 (call $console_write (i32.const 0xfffffff0) (i32.const 16))
                 (i64.store (i32.const 0) (call $args (i32.const 2048) (i32.const 5)))
                 (i64.store (i32.const 8) (call $args (i32.const 0xffffffff) (i32.const 5)))
                 (i64.store (i32.const 16) (call $args (i32.const 3000) (i32.const 0)))
                 (i64.store (i32.const 24) (call $clock_ns))
                 (i64.store (i32.const 32) (call $clock_ns))",
            )
        );
        let system = System::boot(
            &[component("c", "", &body)],
            "[[domain]]\nname = \"D\"\n[[domain.component]]\nname = \"c\"\nargs = [\"hello world\"]\n",
        );
        let lines: Vec<_> = system.lines().into_iter().filter(|l| l.starts_with("[D]")).collect();
        assert_eq!(lines, ["[D] hello, console"], "bad UTF-8 and a range outside the heap write nothing");
        let results = system.results("D", 5);
        // The whole length of the encoded list, whatever the room; a copy outside the heap is
        // refused.
        assert_eq!(results[..3], [15, HostError::InvalidArgument as i64, 15]);
        assert_eq!(system.heap("D", 2048, 6), b"\x0b\0\0\0h\0", "no more than the room");
        assert!(results[3] > 0 && results[4] >= results[3], "a monotonic clock: {results:?}");
    }
}
