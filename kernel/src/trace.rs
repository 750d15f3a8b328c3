//! The thread activity trace: when switched on, the kernel records when each thread ran on which
//! CPU and each portal call it made, and exports them in the Chrome trace-event format that
//! Perfetto (ui.perfetto.dev) and `chrome://tracing` open — a run seen as JX's Figure 7 shows
//! one. Off, it costs one relaxed atomic load per scheduling decision and per portal call.
//!
//! Domos has no garbage collector, so there are no collection pauses to record; the kernel's own
//! pauses show as gaps between a CPU's slices.

use std::cell::Cell;
use std::fmt::Write as _;
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

/// One recorded event; times are nanoseconds since the trace started.
#[derive(Debug, Clone)]
enum Event {
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

    /// The events so far as a Chrome trace-event JSON document. `domains` names the domain ids
    /// (processes in the viewer); threads are named by what they run.
    pub fn chrome_json(&self, domains: &[(u32, String)]) -> String {
        let events = crate::lock(&self.events).clone();
        let name_of = |id: u32| domains.iter().find(|(d, _)| *d == id).map_or("?", |(_, n)| n.as_str());
        let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        let mut first = true;
        let mut line = |out: &mut String, text: String| {
            if !first {
                out.push_str(",\n");
            }
            first = false;
            out.push_str(&text);
        };
        for (id, name) in domains {
            line(
                &mut out,
                format!(
                    "{{\"ph\":\"M\",\"pid\":{id},\"name\":\"process_name\",\"args\":{{\"name\":\"{}\"}}}}",
                    escape(name)
                ),
            );
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        for event in &events {
            let text = match event {
                Event::ThreadName { domain, thread, label } => format!(
                    "{{\"ph\":\"M\",\"pid\":{domain},\"tid\":{thread},\"name\":\"thread_name\",\"args\":{{\"name\":\"{}\"}}}}",
                    escape(label)
                ),
                Event::Run { domain, thread, cpu, start, duration } => format!(
                    "{{\"ph\":\"X\",\"cat\":\"run\",\"name\":\"run on cpu{cpu}\",\"pid\":{domain},\"tid\":{thread},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"cpu\":{cpu}}}}}",
                    us(*start),
                    us(*duration)
                ),
                Event::Call { domain, thread, target, method, start, duration } => format!(
                    "{{\"ph\":\"X\",\"cat\":\"portal\",\"name\":\"call {}\",\"pid\":{domain},\"tid\":{thread},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"method\":{method}}}}}",
                    escape(name_of(*target)),
                    us(*start),
                    us(*duration)
                ),
            };
            line(&mut out, text);
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        let _ = write!(out, "\n],\"otherData\":{{\"dropped_events\":{dropped}}}}}\n");
        out
    }
}

fn escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c if c.is_control() => format!("\\u{:04x}", c as u32).chars().collect(),
            c => vec![c],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_when_on_and_exports_chrome_trace_events() {
        let trace = Trace::default();
        trace.thread_started(1, 7, "before");
        assert!(crate::lock(&trace.events).is_empty(), "nothing is recorded while off");
        trace.switch_on();
        trace.thread_started(1, 7, "app \"main\"");
        trace.ran(1, 7, 0, 1_000, 2_500);
        Trace::set_running(1, 7);
        trace.called(2, 99, trace.now());
        let json = trace.chrome_json(&[(1, "Client".into()), (2, "Store".into())]);
        assert!(json.starts_with("{\"displayTimeUnit\""), "{json}");
        assert!(json.contains("\"name\":\"process_name\",\"args\":{\"name\":\"Client\"}"));
        assert!(json.contains("\"args\":{\"name\":\"app \\\"main\\\"\"}"), "names are escaped: {json}");
        assert!(
            json.contains("\"cat\":\"run\",\"name\":\"run on cpu0\",\"pid\":1,\"tid\":7,\"ts\":1.000,\"dur\":2.500")
        );
        assert!(json.contains("\"cat\":\"portal\",\"name\":\"call Store\",\"pid\":1,\"tid\":7"));
        assert!(json.trim_end().ends_with("\"dropped_events\":0}}"));
    }
}
