//! The kernel's thread activity trace (`domos_kernel::trace`) as a Chrome trace-event JSON
//! document, for Perfetto or `chrome://tracing`: a process per domain, a track per thread, a
//! slice per run on a CPU and, inside it, one per portal call. Formatting lives here, outside the
//! trusted kernel, which only records.

use std::fmt::Write as _;

use domos_kernel::trace::{Event, Trace};

/// The events of `trace` as a JSON document; `domains` names the domain ids.
pub fn chrome_json(trace: &Trace, domains: &[(u32, String)]) -> String {
    let (events, dropped) = trace.events();
    chrome_json_of(&events, dropped, domains)
}

/// `events` as a JSON document, saying that `dropped` events were lost; `domains` names the
/// domain ids (`domos trace` writes a window of the trace so).
pub fn chrome_json_of(events: &[Event], dropped: u64, domains: &[(u32, String)]) -> String {
    let name_of = |id: u32| domains.iter().find(|(d, _)| *d == id).map_or("?", |(_, n)| n.as_str());
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut lines: Vec<String> = domains
        .iter()
        .map(|(id, name)| {
            format!(
                "{{\"ph\":\"M\",\"pid\":{id},\"name\":\"process_name\",\"args\":{{\"name\":\"{}\"}}}}",
                escape(name)
            )
        })
        .collect();
    lines.extend(events.iter().map(|event| match event {
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
    }));
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    out.push_str(&lines.join(",\n"));
    let _ = write!(out, "\n],\"otherData\":{{\"dropped_events\":{dropped}}}}}\n");
    out
}

/// `text` as the inside of a JSON string.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_an_empty_trace_is_a_valid_document() {
        let trace = Trace::default();
        let json = chrome_json(&trace, &[(1, "a \"quoted\"\nname".into())]);
        assert!(json.contains("\"args\":{\"name\":\"a \\\"quoted\\\"\\u000aname\"}"), "{json}");
        assert!(json.trim_end().ends_with("\"dropped_events\":0}}"), "{json}");
    }
}
