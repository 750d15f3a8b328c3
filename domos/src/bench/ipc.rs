//! `domos bench ipc`: portal round trips, same-domain calls and domain creation, against a
//! Linux pipe ping-pong, a native function call and fork+exec+wait.

use std::time::Duration;

use domos_kernel::{Console, Kernel, KernelOptions};
use domos_loader::config::DomainConfig;

use super::{Figure, baseline, measure, pick};

const CALLS: u64 = 200_000;
/// Calls each client makes in the multicore curve.
const CURVE_CALLS: u64 = 100_000;
/// Kernel CPUs of the multicore curve's points, each with as many client/server pairs.
const CURVE_CPUS: [u32; 3] = [1, 2, 4];
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
    let mut progress = super::Progress::new("ipc", 6 + CURVE_CPUS.len());
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
    let mut curve = Vec::new();
    for cpus in CURVE_CPUS {
        progress.step(&format!("{cpus} client/server pairs on {cpus} kernel CPUs"));
        curve.push((cpus, pairs_throughput(cpus)?));
    }
    let one = curve.first().map_or(0.0, |&(_, calls)| calls);
    let mut figures = vec![
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
    ];
    for (cpus, calls) in curve {
        figures.push(Figure {
            name: super::leak(format!("portal_null_pairs_cpus_{cpus}")),
            unit: "calls/s",
            value: calls,
            baseline: super::leak(format!("linear_from_1_cpu_x{cpus}")),
            baseline_value: one * f64::from(cpus),
            what: super::leak(format!(
                "null calls per second, {cpus} client domain(s) each calling a server domain of its own, on {cpus} kernel CPU(s)"
            )),
        });
    }
    Ok(figures)
}

/// Null portal calls per second of `cpus` client domains that each call a server domain of
/// their own, all at once on `cpus` kernel CPUs: every client's calls over the time from the
/// first client's start to the last one's end (the multicore curve: it should grow with the CPUs
/// the machine has, not collapse on a lock).
fn pairs_throughput(cpus: u32) -> Result<f64, String> {
    let mut config = format!("[system]\ncpus = {cpus}\n");
    for pair in 0..cpus {
        config.push_str(&format!(
            "[[domain]]\nname = \"Server{pair}\"\n[[domain.component]]\nname = \"bench-ipc\"\nargs = \"server\"\n\
             register = {{ IpcBench = \"IpcBench{pair}\" }}\n\
             [[domain]]\nname = \"Client{pair}\"\n[[domain.component]]\nname = \"bench-ipc\"\n\
             args = \"window {CURVE_CALLS}\"\nbind = {{ IpcBench = \"IpcBench{pair}\" }}\n"
        ));
    }
    let results = measure(&config)?;
    let stamps = |name: &str| results.iter().filter(|(n, _)| n == name).map(|&(_, ns)| ns).collect::<Vec<f64>>();
    let (starts, ends) = (stamps("window_start"), stamps("window_end"));
    if starts.len() != cpus as usize || ends.len() != cpus as usize {
        return Err(format!("{} of {cpus} clients reported", starts.len().min(ends.len())));
    }
    let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let last = ends.iter().copied().fold(0.0, f64::max);
    Ok((u64::from(cpus) * CURVE_CALLS) as f64 / (last - first) * 1e9)
}
