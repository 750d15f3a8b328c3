//! Progress of long work on a terminal: one line on standard error, rewritten in place and
//! cleared when the work ends, shown only when standard error is a terminal, so that pipes and
//! logs get nothing but the results.

use std::io::Write;
use std::time::{Duration, Instant};

/// How often a line that changes with every unit of work is redrawn.
const REDRAW: Duration = Duration::from_millis(100);

/// One line of progress, prefixed with what does the work (`domos bench sched`).
pub struct Progress {
    prefix: String,
    shown: bool,
    drawn: Option<Instant>,
}

impl Progress {
    /// Progress of `prefix`'s work; silent unless standard error is a terminal.
    pub fn new(prefix: String) -> Progress {
        Progress { prefix, shown: std::io::IsTerminal::is_terminal(&std::io::stderr()), drawn: None }
    }

    /// Shows `text` now.
    pub fn show(&mut self, text: &str) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[2K{}: {text}", self.prefix);
            self.drawn = Some(Instant::now());
        }
    }

    /// Shows the text `text` makes, unless the line was drawn less than 100 ms ago: for work that
    /// reports every few microseconds.
    pub fn update(&mut self, text: impl FnOnce() -> String) {
        if self.shown && self.drawn.is_none_or(|at| at.elapsed() >= REDRAW) {
            self.show(&text());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown && self.drawn.is_some() {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}
