//! JX's Figure 7 for Domos: a few milliseconds of the thread activity trace drawn as one lane
//! per thread, a bar wherever the thread ran (coloured by kernel CPU) and a tick under it for each
//! portal call it made — the picture Perfetto shows of the full trace, small enough for the docs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use domos_kernel::trace::Event;

use super::super::svg::{COLOURS, document};

/// A thread: its domain and its id.
type Thread = (u32, u32);

/// A run: its start, its length and the kernel CPU.
type Slice = (u64, u64, u32);

/// The lanes of the threads that ran between `from` and `to` (ns since the trace started),
/// labelled with their domain's name (`domains`) and the thread's.
pub fn picture(events: &[Event], domains: &[(u32, String)], from: u64, to: u64, title: &str) -> String {
    let span = to.saturating_sub(from).max(1) as f64;
    let mut names: BTreeMap<Thread, String> = BTreeMap::new();
    let mut runs: BTreeMap<Thread, Vec<Slice>> = BTreeMap::new();
    let mut calls: BTreeMap<Thread, Vec<u64>> = BTreeMap::new();
    for event in events {
        match event {
            Event::ThreadName { domain, thread, label } => {
                names.insert((*domain, *thread), label.clone());
            }
            Event::Run { domain, thread, cpu, start, duration } if *start < to && start + duration > from => {
                runs.entry((*domain, *thread)).or_default().push((*start, *duration, *cpu));
            }
            Event::Call { domain, thread, start, .. } if (from..to).contains(start) => {
                calls.entry((*domain, *thread)).or_default().push(*start);
            }
            _ => {}
        }
    }
    let domain_name = |id: u32| domains.iter().find(|(d, _)| *d == id).map_or("?", |(_, n)| n.as_str());
    let (left, right, top, lane, bottom) = (230.0, 20.0, 50.0, 22.0, 50.0);
    let width = 1000.0;
    let plot = width - left - right;
    let height = top + lane * runs.len().max(1) as f64 + bottom;
    let x = |ns: u64| left + (ns.clamp(from, to) - from) as f64 / span * plot;
    let mut svg = document(width, height, left + plot / 2.0, title);
    let microseconds = span / 1000.0;
    for i in 0..=5 {
        let at = left + plot * f64::from(i) / 5.0;
        let _ = writeln!(
            svg,
            "<line x1=\"{at:.1}\" y1=\"{top}\" x2=\"{at:.1}\" y2=\"{0}\" stroke=\"#ddd\"/><text x=\"{at:.1}\" y=\"{1}\" text-anchor=\"middle\">{2:.0} µs</text>",
            height - bottom,
            height - bottom + 16.0,
            microseconds * f64::from(i) / 5.0
        );
    }
    for (row, (key, slices)) in runs.iter().enumerate() {
        let y = top + lane * row as f64;
        let label = names.get(key).map_or_else(|| format!("thread {}", key.1), Clone::clone);
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{} / {label}</text>",
            left - 6.0,
            y + lane * 0.65,
            domain_name(key.0)
        );
        for (start, duration, cpu) in slices {
            let (x0, x1) = (x(*start), x(start + duration));
            let _ = writeln!(
                svg,
                "<rect x=\"{x0:.2}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"{}\"/>",
                y + 3.0,
                (x1 - x0).max(0.5),
                lane - 9.0,
                COLOURS[*cpu as usize % COLOURS.len()]
            );
        }
        for start in calls.get(key).into_iter().flatten() {
            let _ = writeln!(
                svg,
                "<line x1=\"{0:.2}\" y1=\"{1:.1}\" x2=\"{0:.2}\" y2=\"{2:.1}\" stroke=\"black\"/>",
                x(*start),
                y + lane - 6.0,
                y + lane - 1.0
            );
        }
    }
    let cpus: std::collections::BTreeSet<u32> = runs.values().flatten().map(|(_, _, cpu)| *cpu).collect();
    for (i, cpu) in cpus.iter().enumerate() {
        let at = left + 150.0 * i as f64;
        let _ = writeln!(
            svg,
            "<rect x=\"{at}\" y=\"{0}\" width=\"14\" height=\"10\" fill=\"{1}\"/><text x=\"{2}\" y=\"{3}\">ran on kernel CPU {cpu}</text>",
            height - 20.0,
            COLOURS[*cpu as usize % COLOURS.len()],
            at + 18.0,
            height - 11.0
        );
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/><text x=\"{3}\" y=\"{2}\">portal call</text>",
        left + 150.0 * cpus.len() as f64,
        height - 20.0,
        height - 11.0,
        left + 150.0 * cpus.len() as f64 + 6.0
    );
    svg.push_str("</svg>\n");
    svg
}

/// A window of `length` ns in the middle of the runs of `events`.
pub fn middle(events: &[Event], length: u64) -> (u64, u64) {
    let runs = || {
        events.iter().filter_map(|e| match e {
            Event::Run { start, duration, .. } => Some((*start, start + duration)),
            _ => None,
        })
    };
    let first = runs().map(|r| r.0).min().unwrap_or(0);
    let last = runs().map(|r| r.1).max().unwrap_or(0);
    let from = (first + last) / 2;
    (from.saturating_sub(length / 2).max(first), from.saturating_sub(length / 2).max(first) + length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_per_thread_that_ran_a_bar_per_run_and_a_tick_per_call() {
        let events = vec![
            Event::ThreadName { domain: 1, thread: 7, label: "svc-nfs thread 7".into() },
            Event::Run { domain: 1, thread: 7, cpu: 0, start: 1_000, duration: 500 },
            Event::Run { domain: 1, thread: 8, cpu: 1, start: 1_200, duration: 300 },
            Event::Run { domain: 1, thread: 9, cpu: 1, start: 9_000, duration: 300 },
            Event::Call { domain: 1, thread: 7, target: 1, method: 3, start: 1_100, duration: 50 },
        ];
        let svg = picture(&events, &[(1, "FileServer".into())], 1_000, 2_000, "t");
        assert!(svg.contains(">FileServer / svc-nfs thread 7</text>") && svg.contains(">FileServer / thread 8</text>"));
        assert!(!svg.contains("thread 9"), "a thread that did not run in the window has no lane");
        assert_eq!(svg.matches("<rect x=").count(), 2 + 2, "two runs and two CPUs in the legend");
        assert!(svg.contains("stroke=\"black\"/>"), "the call's tick");
        assert_eq!(middle(&events, 1_000), (4_650, 5_650));
    }
}
