//! The system console: lines from domains, prefixed with the domain's name.

use std::io::Write;
use std::sync::Mutex;

/// Where console lines go.
pub enum Console {
    /// Standard output.
    Stdout,
    /// Kept in memory (tests and benchmarks read them).
    Capture(Mutex<Vec<String>>),
}

impl Console {
    /// A console that keeps its lines.
    pub fn capture() -> Console {
        Console::Capture(Mutex::new(Vec::new()))
    }

    /// Writes one line from `source` (a domain name, or `kernel`).
    pub fn line(&self, source: &str, text: &str) {
        let line = format!("[{source}] {}", text.trim_end());
        match self {
            Console::Stdout => {
                let _ = writeln!(std::io::stdout().lock(), "{line}");
            }
            Console::Capture(lines) => crate::lock(lines).push(line),
        }
    }

    /// The captured lines (empty for `Stdout`).
    pub fn lines(&self) -> Vec<String> {
        match self {
            Console::Stdout => Vec::new(),
            Console::Capture(lines) => crate::lock(lines).clone(),
        }
    }
}
