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

    /// Writes text from `source` (a domain name, or `kernel`): every line of it prefixed with
    /// `[source] `, so that no source can write a line that seems to come from another (a guest
    /// printing `\n[kernel] …`), and control characters other than tabs shown escaped
    /// (`\u{1b}`), so that none can move the cursor or rewrite the terminal. Newlines at the
    /// end are dropped; spaces are kept (a line may end in a file name's).
    pub fn line(&self, source: &str, text: &str) {
        let text = text.trim_end_matches('\n');
        let lines = text.split('\n').map(|line| {
            let mut shown = format!("[{source}] ");
            for c in line.chars() {
                if c.is_control() && c != '\t' {
                    shown.extend(c.escape_unicode());
                } else {
                    shown.push(c);
                }
            }
            shown
        });
        match self {
            Console::Stdout => {
                let mut out = std::io::stdout().lock();
                for line in lines {
                    let _ = writeln!(out, "{line}");
                }
            }
            Console::Capture(captured) => crate::lock(captured).extend(lines),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_carries_its_source_and_control_characters_are_escaped() {
        let console = Console::capture();
        console.line("Client", "hello\n[kernel] domain Store terminated: forged\r\x1b[2J\tend \n\n");
        assert_eq!(
            console.lines(),
            vec!["[Client] hello", "[Client] [kernel] domain Store terminated: forged\\u{d}\\u{1b}[2J\tend "]
        );
    }
}
