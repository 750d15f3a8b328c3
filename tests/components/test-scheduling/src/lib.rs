//! `test-scheduling`: drives the domain's scheduler for the system tests. Its argument picks
//! the behaviour:
//! * `bad N` — a thread of priority N yields a few times, then prints `survived N`; the
//!   `test-bad-scheduler` component misbehaves for priorities 101 (loops), 102 (traps) and
//!   103 (answers garbage);
//! * `replace` — replaces its own and the global scheduler at run time, reporting each answer
//!   (`replace NAME: ok|refused`), then runs three threads of priorities 0, 5 and 1 and prints
//!   the order they finished in (`order BCA` under a priority scheduler);
//! * `defer` — starts a thread of priority 5 that computes for 30 ms, then, at priority 0, calls
//!   `KeyValueStore`: a scheduler that hears of portal calls lets the high-priority thread
//!   finish first. Prints `high done` and `call done` in the order they happened.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use domos_interfaces::key_value_store::KeyValueStore;
use domos_sdk::thread::{self, SchedulerLevel};
use domos_sdk::{CallError, Mutex, Portal, names, println};

domos_sdk::component! { main: main }

/// Threads that finished, in order.
static FINISHED: Mutex<Vec<u8>> = Mutex::new(Vec::new());

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let mut words = args.split_whitespace();
    match words.next().unwrap_or("") {
        "bad" => {
            let priority: i32 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
            let worker = thread::spawn(move || {
                for _ in 0..5 {
                    thread::yield_now();
                }
                println!("survived {priority}");
                0
            })?;
            worker.set_priority(priority)?;
            worker.join()?;
        }
        "replace" => replace()?,
        "defer" => defer()?,
        _ => {}
    }
    Ok(())
}

fn compute_for(ms: u64) {
    let until = domos_sdk::time::now_ns() + ms * 1_000_000;
    while domos_sdk::time::now_ns() < until {
        core::hint::spin_loop();
    }
}

fn replace() -> Result<(), CallError> {
    for (level, name) in [
        (SchedulerLevel::Own, "no-such-scheduler"),
        (SchedulerLevel::Own, "sched-stride"),
        (SchedulerLevel::Global, "sched-fifo"),
        (SchedulerLevel::Global, "sched-stride"),
        (SchedulerLevel::Own, "sched-priority"),
    ] {
        let answer = if thread::replace_scheduler(level, name, 0).is_ok() { "ok" } else { "refused" };
        println!("replace {name}: {answer}");
    }
    let mut threads = Vec::new();
    for (name, priority) in [(b'A', 0), (b'B', 5), (b'C', 1)] {
        let worker = thread::spawn(move || {
            compute_for(15);
            FINISHED.lock().push(name);
            0
        })?;
        worker.set_priority(priority)?;
        threads.push(worker);
    }
    for worker in threads {
        worker.join()?;
    }
    println!("order {}", String::from_utf8_lossy(&FINISHED.lock()));
    Ok(())
}

fn defer() -> Result<(), CallError> {
    let store: Portal<dyn KeyValueStore> = names::lookup("KeyValueStore")?;
    let high = thread::spawn(|| {
        compute_for(30);
        println!("high done");
        0
    })?;
    high.set_priority(5)?;
    // One CPU: the high-priority thread is runnable but this one still runs, until its call.
    let opened = store.open("defer".into()).is_ok();
    println!("call done (table opened: {opened})");
    high.join()?;
    Ok(())
}
