//! `bench-ipc`: the workload of `domos bench ipc`.
//!
//! Arguments pick the role:
//! * `server` — serves `IpcBench` under the name `IpcBench`;
//! * `client N [NAME]` — times N calls of each kind (or only the kind NAME, for profiling) to
//!   `IpcBench` and to a local object, and prints `bench NAME NANOSECONDS_PER_CALL` lines;
//! * `handoff N` — two threads make N null calls each at once, so that with one service thread
//!   calls find the service busy and wait for it through the scheduler;
//! * `stamp` — prints the kernel clock as the first thing its main thread does (domain creation);
//! * `nest N` — times N look-ups of `IpcBench` and N small reads (`add3`) through it, for the
//!   nesting benchmark (run inside sandboxes that wrap `IpcBench`).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use domos_interfaces::ipc_bench::IpcBench;
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, Portal, names, println, thread};

domos_sdk::component! { init: init, main: main }

fn init() -> Result<(), CallError> {
    if domos_sdk::args().trim() == "server" {
        names::register("IpcBench", &Echo.into_portal())?;
    }
    Ok(())
}

/// Runs `op` `n` times, unless `only` names another kind; prints nanoseconds per call.
fn time(
    only: Option<&str>,
    name: &str,
    n: u64,
    mut op: impl FnMut() -> Result<(), CallError>,
) -> Result<(), CallError> {
    if only.is_some_and(|only| only != name) {
        return Ok(());
    }
    for _ in 0..n / 10 {
        op()?;
    }
    let start = now_ns();
    for _ in 0..n {
        op()?;
    }
    let per_call = (now_ns() - start) as f64 / n as f64;
    println!("bench {name} {per_call:.2}");
    Ok(())
}

fn main() -> Result<(), CallError> {
    let stamp = now_ns();
    let args = domos_sdk::args();
    let mut words = args.split_whitespace();
    let role = words.next().unwrap_or("");
    let n: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(100_000);
    let only = words.next();
    match role {
        "stamp" => println!("stamp {stamp}"),
        "client" => {
            let remote: Portal<dyn IpcBench> = names::lookup("IpcBench")?;
            time(only, "portal_null_rt", n, || remote.null())?;
            time(only, "portal_3int_rt", n, || remote.add3(1, 2, 3).map(|_| ()))?;
            let text = String::from("0123456789").repeat(10);
            time(only, "portal_str100_rt", n, || remote.measure(&text).map(|_| ()))?;
            let local = Echo.into_portal();
            time(only, "local_call", n * 10, || local.null())?;
        }
        "window" => {
            // For the multicore curve: when this client's `n` null calls began and ended (the
            // kernel's clock), so that the host divides all clients' calls by the time from the
            // first start to the last end, not by each client's own time.
            let remote: Portal<dyn IpcBench> = names::lookup("IpcBench")?;
            (0..n / 10).try_for_each(|_| remote.null())?;
            let start = now_ns();
            (0..n).try_for_each(|_| remote.null())?;
            println!("bench window_start {start}");
            println!("bench window_end {}", now_ns());
        }
        "nest" => {
            time(None, "nest_lookup", n, || names::lookup::<dyn IpcBench>("IpcBench").map(drop))?;
            let remote: Portal<dyn IpcBench> = names::lookup("IpcBench")?;
            time(None, "nest_read", n, || remote.add3(1, 2, 3).map(drop))?;
        }
        "handoff" => {
            let workers: alloc::vec::Vec<_> = (0..2)
                .map(|_| {
                    thread::spawn(move || {
                        let Ok(remote) = names::lookup::<dyn IpcBench>("IpcBench") else {
                            return -1;
                        };
                        (0..n).try_for_each(|_| remote.null()).map_or(-1, |()| 0)
                    })
                })
                .collect::<Result<_, _>>()?;
            let start = now_ns();
            for worker in workers {
                worker.join()?;
            }
            println!("bench portal_handoff_rt {:.2}", (now_ns() - start) as f64 / (2 * n) as f64);
        }
        _ => {}
    }
    Ok(())
}

/// Answers at once.
struct Echo;

impl IpcBench for Echo {
    fn null(&self) -> Result<(), CallError> {
        Ok(())
    }
    fn add3(&self, a: u32, b: u32, c: u32) -> Result<u32, CallError> {
        Ok(a.wrapping_add(b).wrapping_add(c))
    }
    fn measure(&self, text: &str) -> Result<u32, CallError> {
        Ok(text.len() as u32)
    }
}
