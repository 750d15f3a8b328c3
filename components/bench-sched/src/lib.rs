//! `bench-sched`: the workload of `domos bench sched`. Arguments pick what to time; each prints
//! `bench NAME NANOSECONDS`:
//! * `yield N` — two threads of this domain yield to each other N times each (run on one
//!   kernel CPU, so that every yield is a thread switch): `yield`, per yield;
//! * `pingpong N` — two threads hand a turn back and forth N times through two atomic
//!   variables, each blocking until its turn: `wait_notify_rt`, per round trip;
//! * `spawn N` — N threads started and joined one after the other: `thread_start`, from the
//!   request to the thread's first instruction, median;
//! * `compute` — a tight arithmetic loop and MD5 of 1 MiB (`compute_loop`, `compute_md5`),
//!   which `domos bench sched` runs with and without preemption checks;
//! * `donate MS` — for MS milliseconds, asks the `Grafts` server to fingerprint 64 KiB again and
//!   again, then prints how many calls it made (`donated calls N`): the server's work runs on
//!   this thread's CPU time and share (CPU inheritance).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use domos_sdk::sync::AtomicVariable;
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, println, thread};

domos_sdk::component! { main: main }

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let mut words = args.split_whitespace();
    let role = words.next().unwrap_or("");
    let n: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(100_000);
    match role {
        "yield" => yields(n),
        "pingpong" => ping_pong(n),
        "spawn" => spawns(n),
        "donate" => donate(n),
        "compute" => {
            compute();
            Ok(())
        }
        _ => Ok(()),
    }
}

fn yields(n: u64) -> Result<(), CallError> {
    let other = thread::spawn(move || {
        for _ in 0..n {
            thread::yield_now();
        }
        0
    })?;
    let start = now_ns();
    for _ in 0..n {
        thread::yield_now();
    }
    other.join()?;
    println!("bench yield {:.2}", (now_ns() - start) as f64 / (2 * n) as f64);
    Ok(())
}

/// Blocks until `variable` holds `value`, which only the other thread sets.
fn await_value(variable: &AtomicVariable, value: u32) -> Result<(), CallError> {
    loop {
        let now = variable.get()?;
        if now == value {
            return Ok(());
        }
        variable.block_if_equal(now)?;
    }
}

fn ping_pong(n: u64) -> Result<(), CallError> {
    let ping: &'static AtomicVariable = alloc::boxed::Box::leak(alloc::boxed::Box::new(AtomicVariable::new(0)?));
    let pong: &'static AtomicVariable = alloc::boxed::Box::leak(alloc::boxed::Box::new(AtomicVariable::new(0)?));
    let rounds = n as u32;
    let other = thread::spawn(move || {
        let run = || -> Result<(), CallError> {
            for i in 1..=rounds {
                await_value(ping, i)?;
                pong.set_and_unblock(i, 1)?;
            }
            Ok(())
        };
        i32::from(run().is_err())
    })?;
    let start = now_ns();
    for i in 1..=rounds {
        ping.set_and_unblock(i, 1)?;
        await_value(pong, i)?;
    }
    let elapsed = now_ns() - start;
    other.join()?;
    println!("bench wait_notify_rt {:.2}", elapsed as f64 / f64::from(rounds));
    Ok(())
}

static STARTED_AT: AtomicU64 = AtomicU64::new(0);

fn spawns(n: u64) -> Result<(), CallError> {
    let mut samples = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let requested = now_ns();
        let started = thread::spawn(|| {
            STARTED_AT.store(now_ns(), Ordering::Release);
            0
        })?;
        started.join()?;
        samples.push(STARTED_AT.load(Ordering::Acquire).saturating_sub(requested));
    }
    samples.sort_unstable();
    println!("bench thread_start {}", samples[samples.len() / 2]);
    Ok(())
}

/// The tight loop: a linear congruential generator, 100 million steps.
fn lcg(steps: u64, seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..steps {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i | 1);
    }
    x
}

fn compute() {
    const STEPS: u64 = 100_000_000;
    let seed = now_ns();
    let start = now_ns();
    let x = lcg(STEPS, seed);
    println!("bench compute_loop {:.3}", (now_ns() - start) as f64 / STEPS as f64);
    let data = domos_grafts::md5::inputs();
    let mut best = u64::MAX;
    for _ in 0..10 {
        let start = now_ns();
        core::hint::black_box(domos_grafts::md5::digest(&data));
        best = best.min(now_ns() - start);
    }
    println!("bench compute_md5 {best}");
    println!("(checksum {x})");
}

fn donate(ms: u64) -> Result<(), CallError> {
    use domos_interfaces::grafts::Grafts;
    let server: domos_sdk::Portal<dyn Grafts> = domos_sdk::names::lookup("Grafts")?;
    let chunk = alloc::vec![7u8; 64 << 10];
    let deadline = now_ns() + ms * 1_000_000;
    let mut calls = 0u64;
    while now_ns() < deadline {
        server.md5_update(chunk.clone())?;
        calls += 1;
    }
    println!("donated calls {calls}");
    Ok(())
}
