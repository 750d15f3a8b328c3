//! The stress test of the kernel's paths (issue 14): every path on every kernel CPU at once for a
//! minute — portal calls from many threads, memory objects made, derived and revoked, waits and
//! wake-ups, yields, sleeps, children created and terminated mid-call, restartable calls into a
//! service that waits, abandoned and made again when they meet its lock held — then checks that nothing
//! was lost, nothing leaked (each domain's handles and memory are what a short run of the same
//! system leaves: what grows with the work is a leak, what a short run makes too is a cache,
//! such as a lock's wait queue made at its first contention or a service's idle threads, and a
//! heap's high-water mark may differ by a few pages) and every waiter woke (the system ends by
//! itself).

use std::time::Duration;

use domos_loader::ComponentRegistry;

domos_testing::main! {
    every_path_at_once_for_a_minute_loses_nothing_leaks_nothing_and_wakes_every_waiter,
}

mod common;
use common::{Run, figure, registry_with};

fn registry() -> ComponentRegistry {
    registry_with(&["test-stress", "test-waiting"])
}

/// How long the load runs.
const SECONDS: u64 = 60;
/// How long the short run that warms every cache runs.
const WARM_SECONDS: u64 = 2;

/// The system: a service, two clients of ten threads each, and a domain that churns children
/// calling the service, on two kernel CPUs. The service runs at most two calls at once, so that
/// further callers wait for one of its service threads (the hand-off path) and its pool of idle
/// service threads is the same after any run that had two calls at once. (Every domain of
/// `test-stress` needs the `domains` grant, which its churning imports.) Beside them a service
/// that waits (`test-waiting guarded`, two service threads too; the `IpcBench` its manifest
/// offers is wired under another name, in both its domains) and a client that reads it restartably from three
/// threads while a fourth holds its lock now and then.
fn config(seconds: u64) -> String {
    let client = |name: &str| {
        format!(
            "[[domain]]\nname = \"{name}\"\nheap = \"8 MiB\"\ngrants = [\"domains\"]\n\
             [[domain.component]]\nname = \"test-stress\"\nargs = \"client {seconds}\"\n"
        )
    };
    format!(
        "[system]\ncpus = 2\n\
         [[domain]]\nname = \"Service\"\nservice_threads = 2\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"server\"\n\
         {}{}\
         [[domain]]\nname = \"Churn\"\nheap = \"32 MiB\"\ngrants = [\"domains\"]\n\
         [[domain.component]]\nname = \"test-stress\"\nargs = \"churn {seconds}\"\n\
         [[domain]]\nname = \"Guarded\"\nservice_threads = 2\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"guarded\"\n\
         register = {{ IpcBench = \"Sleepy\" }}\n\
         [[domain]]\nname = \"GuardedLoad\"\n[[domain.component]]\nname = \"test-waiting\"\nargs = \"guarded-load {seconds}\"\n\
         register = {{ IpcBench = \"Sleepy\" }}\n",
        client("ClientA"),
        client("ClientB")
    )
}

/// Most wait queues a domain of this system makes: one per lock or condition variable that
/// ever has a waiter (the component's statics and the SDK's), each made once, at its first
/// contention, so that two runs may differ in which they made.
const MAX_WAIT_QUEUES: usize = 16;

/// How far a domain's quota may end from the short run's: a component's heap grows and never
/// shrinks, so a run whose calls once overlapped more holds a few more pages of it, which is no
/// leak. A leak of anything per call, memory object or child would be megabytes in a minute (and
/// the quota's limit would refuse it, failing the clients).
const HEAP_SLACK: u64 = 256 * 1024;

/// What a domain holds: its name, its handles by kind (without the wait queues of its locks,
/// atomic variables, counted apart) and its bytes of quota.
type Holding = (String, Vec<(&'static str, usize)>, u64);

/// What each long-lived domain holds once the system has ended.
fn holdings(run: &Run) -> Vec<Holding> {
    ["Service", "ClientA", "ClientB", "Churn", "Guarded", "GuardedLoad"]
        .iter()
        .map(|name| {
            let domain = run.domain(name);
            let mut kinds = domain.handle_kinds();
            let queues = kinds.remove("atomic").unwrap_or(0);
            assert!(queues <= MAX_WAIT_QUEUES, "{name}: {queues} atomic variables");
            (name.to_string(), kinds.into_iter().collect(), domain.heap_used())
        })
        .collect()
}

fn every_path_at_once_for_a_minute_loses_nothing_leaks_nothing_and_wakes_every_waiter() {
    // The same system for a moment: what each domain holds once its caches are made.
    let warm = Run::boot(&config(WARM_SECONDS), Duration::from_secs(WARM_SECONDS + 120));
    assert!(warm.outcome.finished, "the short run ends: {:?}", warm.lines());
    let at_rest = holdings(&warm);
    drop(warm);

    let run = Run::boot(&config(SECONDS), Duration::from_secs(SECONDS + 120));
    let lines = run.lines();
    // Every thread ended: every waiter woke, every sleeper and yielder stopped when told.
    assert!(run.outcome.finished, "the stressed system ends by itself: {lines:?}");
    let mut calls_reported = 0;
    for name in ["ClientA", "ClientB"] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("[{name}] stress client:")))
            .unwrap_or_else(|| panic!("{name} reports: {lines:?}"));
        assert_eq!(figure(line, "wrong"), 0, "every answer right, every revoked view refused: {line}");
        // `shared`: readers held the reader–writer lock together; `writes`: its writer was not
        // kept out by them.
        for key in ["calls", "memory", "turns", "yields", "sleeps", "reads", "shared", "writes"] {
            assert!(figure(line, key) > 0, "{key} happened: {line}");
        }
        // Nothing lost between the client and the kernel: every call it made was counted, and
        // it counted only calls that were answered.
        let calls = figure(line, "calls");
        assert_eq!(run.domain(name).calls_made(), calls, "{name}: {line}");
        calls_reported += calls;
    }
    let churn = lines.iter().find(|l| l.starts_with("[Churn] stress churn:")).expect("Churn reports");
    assert!(figure(churn, "churn:") > 10, "children were made and terminated: {churn}");
    assert!(run.domain("Service").calls_served() >= calls_reported, "every call was served");
    assert_eq!(run.domain("Service").termination_reason(), None, "the service outlives its terminated callers");
    // The restartable reads: none wrong, every hold counted once, some abandoned and made again,
    // and the kernel counted each read once however many times it was started.
    let load = lines.iter().find(|l| l.starts_with("[GuardedLoad] guarded load:")).expect("GuardedLoad reports");
    assert_eq!(figure(load, "wrong"), 0, "{load}");
    assert!(figure(load, "reads") > 0 && figure(load, "holds") > 0, "{load}");
    assert_eq!(figure(load, "value"), figure(load, "holds"), "{load}");
    assert!(figure(load, "starts") > figure(load, "reads") + 1, "some reads were abandoned: {load}");
    assert_eq!(run.domain("GuardedLoad").calls_made(), figure(load, "calls"), "calls made {load}");
    assert_eq!(run.domain("Guarded").termination_reason(), None, "{load}");
    // Nothing leaked: the handles of each domain are what the short run left, its memory nearly.
    for ((name, kinds, heap), (_, kinds_at_rest, heap_at_rest)) in holdings(&run).into_iter().zip(at_rest) {
        assert_eq!(kinds, kinds_at_rest, "{name}: handles after the stress as after a moment of it");
        assert!(heap.abs_diff(heap_at_rest) <= HEAP_SLACK, "{name}: {heap} B of quota, {heap_at_rest} B at rest");
    }
    let live = run.kernel.domains().iter().filter(|d| !d.is_terminated()).count();
    assert_eq!(live, 6, "no child outlives its termination");
}
