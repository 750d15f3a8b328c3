//! The thread activity trace: when switched on, the kernel records when each thread ran on which
//! CPU and each portal call it made; `domos boot --trace` writes them in the Chrome trace-event
//! format that Perfetto (ui.perfetto.dev) and `chrome://tracing` open — a run seen as JX's
//! Figure 7 shows one. Off, it costs one relaxed atomic load per scheduling decision and per
//! portal call.
//!
//! Domos has no garbage collector, so there are no collection pauses to record; the kernel's own
//! pauses show as gaps between a CPU's slices.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Events kept at most; later ones are counted and dropped, so a long run cannot exhaust memory.
pub const MAX_EVENTS: usize = 1 << 20;

thread_local! {
    /// The domain and thread the calling kernel CPU is running, for events recorded inside a
    /// poll (portal calls).
    static RUNNING: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// One recorded event; times are nanoseconds since the trace started, domains and threads are
/// kernel ids.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs, reason = "the fields are named for what they are")]
pub enum Event {
    /// A thread ran on a CPU from `start` for `duration`.
    Run { domain: u32, thread: u32, cpu: u32, start: u64, duration: u64 },
    /// A thread's portal call into domain `target`.
    Call { domain: u32, thread: u32, target: u32, method: u32, start: u64, duration: u64 },
    /// A thread's name, recorded when it starts.
    ThreadName { domain: u32, thread: u32, label: String },
}

/// The recorder.
pub struct Trace {
    on: AtomicBool,
    start: Instant,
    events: Mutex<Vec<Event>>,
    dropped: AtomicU64,
}

impl Default for Trace {
    fn default() -> Self {
        Trace {
            on: AtomicBool::new(false),
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
        }
    }
}

impl Trace {
    /// Starts recording.
    pub fn switch_on(&self) {
        self.on.store(true, Ordering::Release);
    }

    /// Stops recording; the events recorded stay (what `domos trace` uses to record a window).
    pub fn switch_off(&self) {
        self.on.store(false, Ordering::Release);
    }

    /// Whether events are being recorded.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Nanoseconds since the trace started.
    pub(crate) fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn push(&self, event: Event) {
        let mut events = crate::lock(&self.events);
        if events.len() < MAX_EVENTS {
            events.push(event);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes which thread the calling CPU runs now.
    pub(crate) fn set_running(domain: u32, thread: u32) {
        RUNNING.with(|running| running.set((domain, thread)));
    }

    pub(crate) fn thread_started(&self, domain: u32, thread: u32, label: &str) {
        if self.is_on() {
            self.push(Event::ThreadName { domain, thread, label: label.to_string() });
        }
    }

    pub(crate) fn ran(&self, domain: u32, thread: u32, cpu: u32, start: u64, duration: u64) {
        self.push(Event::Run { domain, thread, cpu, start, duration });
    }

    pub(crate) fn called(&self, target: u32, method: u32, start: u64) {
        let (domain, thread) = RUNNING.with(Cell::get);
        let duration = self.now().saturating_sub(start);
        self.push(Event::Call { domain, thread, target, method, start, duration });
    }

    /// The events recorded so far, and how many were dropped past [`MAX_EVENTS`]. The `domos`
    /// command writes them in the Chrome trace-event format (`domos/src/trace.rs`).
    pub fn events(&self) -> (Vec<Event>, u64) {
        (crate::lock(&self.events).clone(), self.dropped.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_when_on() {
        let trace = Trace::default();
        trace.thread_started(1, 7, "before");
        assert!(trace.events().0.is_empty(), "nothing is recorded while off");
        trace.switch_on();
        trace.thread_started(1, 7, "main");
        trace.ran(1, 7, 0, 1_000, 2_500);
        Trace::set_running(1, 7);
        trace.called(2, 99, trace.now());
        let (events, dropped) = trace.events();
        assert_eq!(dropped, 0);
        assert_eq!(events[0], Event::ThreadName { domain: 1, thread: 7, label: "main".into() });
        assert_eq!(events[1], Event::Run { domain: 1, thread: 7, cpu: 0, start: 1_000, duration: 2_500 });
        assert!(matches!(events[2], Event::Call { domain: 1, thread: 7, target: 2, method: 99, .. }));
    }
}
