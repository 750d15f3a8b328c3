//! `domos bench sched`: thread switches, wait/notify, thread start and the cost of preemption
//! checks, against Linux threads measured in the same run (`sched_yield` on one CPU, a
//! condition-variable ping-pong, `pthread_create` + `join`) and against the same code compiled
//! without preemption checks.

use super::{Figure, baseline, linux, measure, pick};

const YIELDS: u32 = 200_000;
const ROUND_TRIPS: u32 = 50_000;
const THREADS: u32 = 2_000;

/// Runs the suite.
///
/// # Errors
/// When the measured system fails.
pub fn run() -> Result<Vec<Figure>, String> {
    let domain = |cpus: u32, settings: &str, args: &str| {
        format!(
            "[system]\ncpus = {cpus}\n[[domain]]\nname = \"Sched\"\nheap = \"16 MiB\"\n{settings}[[domain.component]]\nname = \"bench-sched\"\nargs = \"{args}\"\n"
        )
    };
    let yields = pick(&measure(&domain(1, "", &format!("yield {YIELDS}")))?, "yield")?;
    let wait_notify = pick(&measure(&domain(1, "", &format!("pingpong {ROUND_TRIPS}")))?, "wait_notify_rt")?;
    let wait_notify_2cpu = pick(&measure(&domain(2, "", &format!("pingpong {ROUND_TRIPS}")))?, "wait_notify_rt")?;
    let condvar = baseline::condvar_round_trip(ROUND_TRIPS);
    let thread_start = pick(&measure(&domain(2, "", &format!("spawn {THREADS}")))?, "thread_start")?;
    let checked = measure(&domain(1, "", "compute"))?;
    let unchecked = measure(&domain(1, "preemption = false\n", "compute"))?;
    let overhead = |name: &str| -> Result<f64, String> { Ok(pick(&checked, name)? / pick(&unchecked, name)?) };
    Ok(vec![
        Figure {
            name: "yield",
            unit: "ns",
            value: yields,
            baseline: "linux_sched_yield",
            baseline_value: linux::sched_yield_ns(YIELDS)?,
            what: "thread switch by yield between two threads on one CPU",
        },
        Figure {
            name: "wait_notify_rt",
            unit: "ns",
            value: wait_notify,
            baseline: "linux_condvar_rt",
            baseline_value: condvar,
            what: "round trip of a turn between two threads blocking on atomic variables, one kernel CPU",
        },
        Figure {
            name: "wait_notify_rt_2cpu",
            unit: "ns",
            value: wait_notify_2cpu,
            baseline: "linux_condvar_rt",
            baseline_value: condvar,
            what: "the same on two kernel CPUs, where the woken thread may move to the other CPU",
        },
        Figure {
            name: "thread_start",
            unit: "ns",
            value: thread_start,
            baseline: "pthread_create_join",
            baseline_value: baseline::thread_create_join(THREADS),
            what: "from thread_spawn to the new thread's first instruction (median)",
        },
        Figure {
            name: "preempt_overhead_loop",
            unit: "x",
            value: overhead("compute_loop")?,
            baseline: "no_preemption",
            baseline_value: 1.0,
            what: "tight arithmetic loop with epoch checks over the same without",
        },
        Figure {
            name: "preempt_overhead_md5",
            unit: "x",
            value: overhead("compute_md5")?,
            baseline: "no_preemption",
            baseline_value: 1.0,
            what: "MD5 of 1 MiB with epoch checks over the same without",
        },
    ])
}
