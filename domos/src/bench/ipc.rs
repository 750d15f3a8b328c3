//! `domos bench ipc`: portal round trips, same-domain calls and domain creation, against a
//! Linux pipe ping-pong, a native function call and fork+exec+wait.

use std::time::Duration;

use domos_kernel::{Console, Kernel, KernelOptions};
use domos_loader::config::DomainConfig;

use super::{Figure, baseline, measure, pick};

const CALLS: u64 = 200_000;
const HANDOFF_CALLS: u64 = 50_000;
const DOMAINS: usize = 200;

/// Median time from the request to create a domain to the first instruction of its entry point.
fn domain_create() -> Result<f64, String> {
    let kernel = Kernel::start(
        &KernelOptions { cpus: 1, ..KernelOptions::default() },
        crate::embedded_components()?,
        Console::capture(),
    )
    .map_err(|e| e.to_string())?;
    let config: DomainConfig =
        toml::from_str("name = \"Fresh\"\nheap = \"1 MiB\"\n[[component]]\nname = \"bench-ipc\"\nargs = \"stamp\"\n")
            .map_err(|e| e.to_string())?;
    let mut samples = Vec::with_capacity(DOMAINS);
    for _ in 0..DOMAINS {
        let before = kernel.console.lines().len();
        let start = kernel.clock_ns();
        let domain = kernel.create_domain(&config)?;
        kernel.start_main(&domain);
        kernel.scheduler.wait_idle(Some(Duration::from_secs(10)));
        let lines = kernel.console.lines();
        let stamp: u64 = lines[before..]
            .iter()
            .find_map(|l| l.split("stamp ").nth(1)?.trim().parse().ok())
            .ok_or("the new domain printed no stamp")?;
        samples.push(stamp.saturating_sub(start) as f64);
        kernel.terminate(&domain, "measured".into());
    }
    kernel.shutdown();
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// Runs the suite.
///
/// # Errors
/// When a measured system fails.
pub fn run() -> Result<Vec<Figure>, String> {
    let mut progress = super::Progress::new("ipc", 6);
    progress.step("portal round trips between two domains");
    let calls = measure(&format!(
        "[system]\ncpus = 2\n[[domain]]\nname = \"Server\"\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"server\"\n\
         [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"client {CALLS}\"\n"
    ))?;
    progress.step("portal round trips handed off to a waiting caller");
    let handoff = measure(&format!(
        "[system]\ncpus = 2\n[[domain]]\nname = \"Server\"\nservice_threads = 1\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"server\"\n\
         [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"handoff {HANDOFF_CALLS}\"\n"
    ))?;
    let null = pick(&calls, "portal_null_rt")?;
    progress.step("Linux pipe round trips");
    let pipe = baseline::pipe_round_trip(20_000)?;
    progress.step("function calls");
    let function = baseline::function_call(100_000_000);
    progress.step("creating domains");
    let create = domain_create()?;
    progress.step("fork, exec and wait");
    let fork = baseline::fork_exec_wait(200)?;
    Ok(vec![
        Figure {
            name: "portal_null_rt",
            unit: "ns",
            value: null,
            baseline: "linux_pipe_rt",
            baseline_value: pipe,
            what: "null portal round trip between two domains",
        },
        Figure {
            name: "portal_3int_rt",
            unit: "ns",
            value: pick(&calls, "portal_3int_rt")?,
            baseline: "portal_null_rt",
            baseline_value: null,
            what: "request of three integers, one integer back",
        },
        Figure {
            name: "portal_str100_rt",
            unit: "ns",
            value: pick(&calls, "portal_str100_rt")?,
            baseline: "portal_null_rt",
            baseline_value: null,
            what: "100-byte string request",
        },
        Figure {
            name: "portal_handoff_rt",
            unit: "ns",
            value: pick(&handoff, "portal_handoff_rt")?,
            baseline: "portal_null_rt",
            baseline_value: null,
            what: "mean null call, 2 threads on 2 CPUs sharing 1 service thread (busy calls wait through the scheduler)",
        },
        Figure {
            name: "local_call",
            unit: "ns",
            value: pick(&calls, "local_call")?,
            baseline: "function_call",
            baseline_value: function,
            what: "call on a portal to an object of the same component (a reference)",
        },
        Figure {
            name: "domain_create",
            unit: "ns",
            value: create,
            baseline: "fork_exec_wait",
            baseline_value: fork,
            what: "request to the first instruction of the new domain's main (median of 200)",
        },
    ])
}
