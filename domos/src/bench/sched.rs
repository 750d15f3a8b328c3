//! `domos bench sched`: thread switches, wait/notify, thread start and the cost of preemption
//! checks, against Linux threads measured in the same run (`sched_yield` on one CPU, a
//! condition-variable ping-pong, `pthread_create` + `join`) and against the same code compiled
//! without preemption checks; and what scheduler components cost: a yield under a scheduler
//! component against the built-in scheduler, and portal round trips with the domain schedulers
//! told of none, one or both sides of each call (JX: 650 → 920–960 → 1180 cycles).

use super::{Figure, baseline, linux, measure, pick};

const YIELDS: u32 = 200_000;
const ROUND_TRIPS: u32 = 50_000;
const THREADS: u32 = 2_000;
const CALLS: u64 = 200_000;
const ROUNDS: usize = 3;

/// A null-call round trip between a client and a server domain whose local schedulers are
/// `client` and `server` (TOML values).
fn portal_round_trip(client: &str, server: &str) -> Result<f64, String> {
    let results = measure(&format!(
        "[system]\ncpus = 2\n[[domain]]\nname = \"Server\"\nscheduler = {server}\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"server\"\n\
         [[domain]]\nname = \"Client\"\nscheduler = {client}\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"client {CALLS}\"\n"
    ))?;
    pick(&results, "portal_null_rt")
}

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
    let mut progress = super::Progress::new("sched", ROUNDS + 1);
    progress.step("yields under the built-in scheduler");
    let yields = pick(&measure(&domain(1, "", &format!("yield {YIELDS}")))?, "yield")?;
    let round_robin = "scheduler = { component = \"sched-round-robin\" }\n";
    // sched-round-robin hears of no portal call; sched-priority of outgoing and incoming ones.
    let (quiet, hearing) = ("{ component = \"sched-round-robin\" }", "{ component = \"sched-priority\" }");
    // The differences are a few tens of nanoseconds, below this machine's noise from boot to
    // boot: the variants run in interleaved rounds and each keeps its best.
    let mut best = [f64::INFINITY; 5];
    for round in 0..ROUNDS {
        progress.step(&format!("scheduler components and portal notifications, round {} of {ROUNDS}", round + 1));
        let round = [
            pick(&measure(&domain(1, round_robin, &format!("yield {YIELDS}")))?, "yield")?,
            portal_round_trip("\"round-robin\"", "\"round-robin\"")?,
            portal_round_trip(quiet, quiet)?,
            portal_round_trip(hearing, quiet)?,
            portal_round_trip(hearing, hearing)?,
        ];
        for (best, value) in best.iter_mut().zip(round) {
            *best = best.min(value);
        }
    }
    let [yields_component, built_in, notify_none, notify_one, notify_both] = best;
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
            name: "yield_sched_component",
            unit: "ns",
            value: yields_component,
            baseline: "yield",
            baseline_value: yields,
            what: "the same yield with the sched-round-robin component as the domain's scheduler",
        },
        Figure {
            name: "portal_rt_notify_none",
            unit: "ns",
            value: notify_none,
            baseline: "portal_rt_built_in",
            baseline_value: built_in,
            what: "null portal round trip, scheduler components on both sides, neither told of the call",
        },
        Figure {
            name: "portal_rt_notify_one",
            unit: "ns",
            value: notify_one,
            baseline: "portal_rt_notify_none",
            baseline_value: notify_none,
            what: "the same, the caller's scheduler told of the outgoing call",
        },
        Figure {
            name: "portal_rt_notify_both",
            unit: "ns",
            value: notify_both,
            baseline: "portal_rt_notify_none",
            baseline_value: notify_none,
            what: "the same, the caller's and the callee's schedulers told",
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
