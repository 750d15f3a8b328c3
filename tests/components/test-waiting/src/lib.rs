//! `test-waiting`: a service whose calls wait, declared with `services_wait` in its manifest.
//!
//! * `server` — serves `IpcBench` under the name `Sleepy`: `null` sleeps 100 ms inside the call,
//!   `add3(a, b, c)` waits on an atomic variable that a thread of this domain sets `a`
//!   milliseconds later and returns `b + c`;
//! * `client` — calls both from its main thread and prints how long each took;
//! * `server` also takes `HELD` in its main thread, then serves the same object under the name
//!   `Locked` and sleeps for an hour: `measure` takes that lock first, so a call to it waits in
//!   the kernel for as long as the server's domain lives;
//! * `client-locked` — waits for `Locked` to be registered, calls `measure` and prints how the
//!   call ended;
//! * `fault-handler` — serves a `MemoryFaultHandler` that waits, under the name `WaitingHandler`:
//!   the kernel, which calls fault handlers synchronously, must refuse it;
//! * `guarded` — serves `Guarded` under the name `Guarded`: a restartable read of a value behind
//!   a lock that the other method holds while it sleeps;
//! * `client-guarded` — reads the value alone, then while a thread of its own holds the lock, and
//!   prints the value and how many times the read was started each time;
//! * `guarded-load SECONDS` — for the stress test: for SECONDS, three threads read `Guarded`'s
//!   value (which must never go down) while a fourth holds the lock for a millisecond, sleeps a
//!   millisecond, and so on; then prints `guarded load: calls C reads R holds H value V starts S
//!   wrong W`, where V must equal H (every hold counted once) and S exceed R (reads abandoned
//!   and made again).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use domos_interfaces::ipc_bench::IpcBench;
use domos_interfaces::memory_fault_handler::MemoryFaultHandler;
use domos_sdk::sync::AtomicVariable;
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, Mutex, Portal, names, println, thread};

domos_sdk::component! { init: init, main: main }

fn init() -> Result<(), CallError> {
    match domos_sdk::args().trim() {
        "server" => names::register("Sleepy", &Sleepy.into_portal())?,
        "fault-handler" => names::register("WaitingHandler", &WaitingHandler.into_portal())?,
        "guarded" => names::register("Guarded", &Value.into_portal())?,
        _ => {}
    }
    Ok(())
}

/// A memory-fault handler that sleeps before it answers.
struct WaitingHandler;

impl MemoryFaultHandler for WaitingHandler {
    fn out_of_memory(&self, _child: u32, short_by: u64) -> Result<u64, CallError> {
        thread::sleep(Duration::from_millis(1))?;
        Ok(short_by)
    }
}

/// Held by the server's main thread; `measure` waits for it.
static HELD: Mutex<()> = Mutex::new(());

fn main() -> Result<(), CallError> {
    match domos_sdk::args().trim() {
        "server" => {
            let _held = HELD.lock();
            println!("holding the lock");
            names::register("Locked", &Sleepy.into_portal())?;
            return thread::sleep(Duration::from_secs(3600));
        }
        "client-locked" => {
            let mut locked = names::lookup::<dyn IpcBench>("Locked");
            for _ in 0..1000 {
                if locked.is_ok() {
                    break;
                }
                thread::sleep(Duration::from_millis(1))?;
                locked = names::lookup("Locked");
            }
            let sleepy = locked?;
            println!("calling a service that waits for a lock");
            let result = sleepy.measure("locked");
            println!("locked call: {}", result.map_or_else(|e| alloc::format!("{e}"), |n| alloc::format!("{n}")));
            return Ok(());
        }
        "client-guarded" => return read_guarded(),
        role if role.starts_with("guarded-load") => {
            let seconds = role.split_whitespace().nth(1).and_then(|w| w.parse().ok()).unwrap_or(1);
            return guarded_load(seconds);
        }
        "client" => {}
        _ => return Ok(()),
    }
    let sleepy: Portal<dyn IpcBench> = names::lookup("Sleepy")?;
    let start = now_ns();
    let slept = sleepy.null();
    println!("a call that sleeps 100 ms: {slept:?} after {} ms", (now_ns() - start) / 1_000_000);
    let start = now_ns();
    let sum = sleepy.add3(50, 2, 3);
    println!("a call that waits for an event 50 ms later: {sum:?} after {} ms", (now_ns() - start) / 1_000_000);
    Ok(())
}

struct Sleepy;

impl IpcBench for Sleepy {
    fn null(&self) -> Result<(), CallError> {
        thread::sleep(Duration::from_millis(100))
    }

    fn add3(&self, a: u32, b: u32, c: u32) -> Result<u32, CallError> {
        let event = AtomicVariable::new(0)?;
        let setter = event.clone_handle()?;
        thread::spawn(move || {
            let _ = thread::sleep(Duration::from_millis(u64::from(a)));
            i32::from(setter.set_and_unblock(1, 1).is_err())
        })?;
        while event.get()? == 0 {
            event.block_if_equal(0)?;
        }
        Ok(b + c)
    }

    fn measure(&self, text: &str) -> Result<u32, CallError> {
        let _held = HELD.lock();
        Ok(text.len() as u32)
    }
}

/// A value behind a lock, in a service that waits.
#[domos_sdk::interface(version = "1.0")]
trait Guarded {
    /// The value (restartable: a run that would wait for the lock is abandoned and made again
    /// the waiting way).
    #[restartable]
    fn value(&self) -> Result<u64, CallError>;
    /// Adds one to the value, then holds the lock for `ms` milliseconds, asleep.
    fn hold(&self, ms: u64) -> Result<(), CallError>;
    /// How many times `value` was started.
    fn starts(&self) -> Result<u64, CallError>;
}

/// `Guarded`'s value.
static VALUE: Mutex<u64> = Mutex::new(0);
/// How many runs of `Guarded::value` started, abandoned ones too.
static STARTS: AtomicU64 = AtomicU64::new(0);

struct Value;

impl Guarded for Value {
    fn value(&self) -> Result<u64, CallError> {
        STARTS.fetch_add(1, Ordering::Relaxed);
        Ok(*VALUE.lock_restartable()?)
    }

    fn hold(&self, ms: u64) -> Result<(), CallError> {
        let mut value = VALUE.lock();
        *value += 1;
        thread::sleep(Duration::from_millis(ms))
    }

    fn starts(&self) -> Result<u64, CallError> {
        Ok(STARTS.load(Ordering::Relaxed))
    }
}

/// Reads `Guarded` alone, then while a thread holds its lock for 50 ms (after 10 ms for the
/// thread to take it).
fn read_guarded() -> Result<(), CallError> {
    let guarded: Portal<dyn Guarded> = names::lookup("Guarded")?;
    let alone = guarded.value()?;
    println!("alone: value {alone}, started {} times", guarded.starts()?);
    let holder = names::lookup::<dyn Guarded>("Guarded")?;
    let holding = thread::spawn(move || i32::from(holder.hold(50).is_err()))?;
    thread::sleep(Duration::from_millis(10))?;
    let held = guarded.value()?;
    println!("held: value {held}, started {} times", guarded.starts()?);
    println!("holder ended with {:?}", holding.join());
    Ok(())
}

/// Set when `guarded_load`'s time is up.
static STOP: AtomicBool = AtomicBool::new(false);
/// `guarded_load`'s counts: calls made, reads, holds, and answers that were wrong.
static CALLS: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
static HOLDS: AtomicU64 = AtomicU64::new(0);
static WRONG: AtomicU64 = AtomicU64::new(0);

/// Reads `Guarded`'s value until told to stop; a value lower than one read before is wrong.
fn read_until_stopped(guarded: &Portal<dyn Guarded>) -> Result<(), CallError> {
    let mut last = 0;
    while !STOP.load(Ordering::Relaxed) {
        let value = guarded.value()?;
        CALLS.fetch_add(1, Ordering::Relaxed);
        READS.fetch_add(1, Ordering::Relaxed);
        if value < last {
            WRONG.fetch_add(1, Ordering::Relaxed);
        }
        last = value;
    }
    Ok(())
}

/// Holds `Guarded`'s lock a millisecond at a time, a millisecond apart, until told to stop.
fn hold_until_stopped(guarded: &Portal<dyn Guarded>) -> Result<(), CallError> {
    while !STOP.load(Ordering::Relaxed) {
        guarded.hold(1)?;
        CALLS.fetch_add(1, Ordering::Relaxed);
        HOLDS.fetch_add(1, Ordering::Relaxed);
        thread::sleep(Duration::from_millis(1))?;
    }
    Ok(())
}

/// The stress test's load on a restartable method (see the module's documentation).
fn guarded_load(seconds: u64) -> Result<(), CallError> {
    let mut threads = alloc::vec::Vec::new();
    for reader in 0..4 {
        let guarded = names::lookup::<dyn Guarded>("Guarded")?;
        threads.push(thread::spawn(move || {
            let run = if reader == 0 { hold_until_stopped(&guarded) } else { read_until_stopped(&guarded) };
            if let Err(e) = run {
                println!("guarded load thread failed: {e:?}");
                WRONG.fetch_add(1, Ordering::Relaxed);
            }
            0
        })?);
    }
    thread::sleep(Duration::from_secs(seconds))?;
    STOP.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join()?;
    }
    let guarded = names::lookup::<dyn Guarded>("Guarded")?;
    let (value, starts) = (guarded.value()?, guarded.starts()?);
    CALLS.fetch_add(2, Ordering::Relaxed);
    println!(
        "guarded load: calls {} reads {} holds {} value {value} starts {starts} wrong {}",
        CALLS.load(Ordering::Relaxed),
        READS.load(Ordering::Relaxed),
        HOLDS.load(Ordering::Relaxed),
        WRONG.load(Ordering::Relaxed)
    );
    Ok(())
}
