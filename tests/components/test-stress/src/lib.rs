//! `test-stress`: many of the kernel's paths at once, for the stress test of the hot paths
//! (issue 14): each run ends by itself and prints what it did, so that the test can check that
//! nothing was lost and every waiter woke.
//!
//! * `client SECONDS` — for SECONDS, seven threads: two call `IpcBench` (`null`, `add3`,
//!   `measure`) and check every answer; one makes, derives, revokes and drops memory objects;
//!   two hand a counter back and forth through a mutex and a condition variable (a wait and a
//!   wake-up per turn); one yields; one sleeps a millisecond at a time; two read a pair of
//!   numbers under a reader–writer lock, yielding while they hold it, so that they hold it
//!   together, while a third writes the pair now and then. Then it stops them, waits for all ten
//!   and prints `stress client: calls C wrong W memory M turns T yields Y sleeps S reads R
//!   shared H writes X` (`shared`: reads that found the other reader inside);
//! * `churn SECONDS` (needs the `domains` grant) — for SECONDS, creates a child running
//!   `forever`, hands it `IpcBench`, lets it call for a moment and terminates it, mid-call; prints
//!   `stress churn: N children`;
//! * `forever` — two threads call `IpcBench` until the domain is terminated.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use domos_interfaces::ipc_bench::IpcBench;
use domos_sdk::domains::Child;
use domos_sdk::time::now_ns;
use domos_sdk::{CallError, Condvar, HostError, Memory, Mutex, Portal, RwLock, names, println, thread};

domos_sdk::component! { main: main }

/// Set when the client's time is up.
static STOP: AtomicBool = AtomicBool::new(false);
static CALLS: AtomicU64 = AtomicU64::new(0);
static WRONG: AtomicU64 = AtomicU64::new(0);
static MEMORY: AtomicU64 = AtomicU64::new(0);
static TURNS: AtomicU64 = AtomicU64::new(0);
static YIELDS: AtomicU64 = AtomicU64::new(0);
static SLEEPS: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
static SHARED: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);

/// The pair the lock-sharing threads read and write: its halves are equal outside a write.
static PAIR: RwLock<(u64, u64)> = RwLock::new((0, 0));
/// Readers holding `PAIR`'s lock now.
static READERS_INSIDE: AtomicU64 = AtomicU64::new(0);

/// The counter the two turn-taking threads hand back and forth: even is the first's turn, odd
/// the second's; `ENDED` once the first has stopped.
static TURN: Mutex<u64> = Mutex::new(0);
static TURNED: Condvar = Condvar::new();
const ENDED: u64 = u64::MAX;

/// Threads of the client that have ended.
static DONE: Mutex<u32> = Mutex::new(0);
static ALL_DONE: Condvar = Condvar::new();
const THREADS: u32 = 10;

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let mut words = args.split_whitespace();
    let role = words.next().unwrap_or("");
    let seconds: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(1);
    match role {
        "client" => client(seconds),
        "churn" => churn(seconds),
        "forever" => forever(),
        _ => {
            println!("test-stress: unknown role {role}");
            Ok(())
        }
    }
}

/// Calls `IpcBench` once each way and checks the answers.
fn call_round(remote: &Portal<dyn IpcBench>, text: &str, i: u32) -> Result<(), CallError> {
    remote.null()?;
    if remote.add3(i, 1, 2)? != i.wrapping_add(3) {
        WRONG.fetch_add(1, Ordering::Relaxed);
    }
    if remote.measure(text)? != text.len() as u32 {
        WRONG.fetch_add(1, Ordering::Relaxed);
    }
    CALLS.fetch_add(3, Ordering::Relaxed);
    Ok(())
}

fn caller() -> Result<(), CallError> {
    let remote: Portal<dyn IpcBench> = names::lookup("IpcBench")?;
    let text = String::from("0123456789").repeat(10);
    let mut i = 0u32;
    while !STOP.load(Ordering::Relaxed) {
        call_round(&remote, &text, i)?;
        i = i.wrapping_add(1);
    }
    Ok(())
}

/// Memory objects made, written, narrowed, revoked and dropped; a revoked view must refuse.
fn memory() -> Result<(), CallError> {
    while !STOP.load(Ordering::Relaxed) {
        let mut whole = Memory::new(64 * 1024)?;
        whole.set_u32(4096, 0x5eed)?;
        let part = whole.subrange(4096, 4096)?;
        let view = part.read_only()?;
        if view.get_u32(0)? != 0x5eed {
            WRONG.fetch_add(1, Ordering::Relaxed);
        }
        whole.revoke()?;
        if view.get_u32(0) != Err(CallError::Host(HostError::Revoked)) {
            WRONG.fetch_add(1, Ordering::Relaxed);
        }
        MEMORY.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// Takes the turns of `parity` (0 or 1) until the first thread stops.
fn take_turns(parity: u64) {
    let mut turn = TURN.lock();
    loop {
        while *turn != ENDED && *turn % 2 != parity {
            turn = TURNED.wait(turn);
        }
        if *turn == ENDED {
            return;
        }
        // The first thread stops on its own turn, so the second is waiting for it.
        *turn = if parity == 0 && STOP.load(Ordering::Relaxed) { ENDED } else { *turn + 1 };
        TURNS.fetch_add(1, Ordering::Relaxed);
        TURNED.notify_all();
    }
}

/// Reads the pair, yielding while it holds the lock so that the other reader comes in beside it
/// (and a writer that got in would be seen).
fn read_pair() -> Result<(), CallError> {
    while !STOP.load(Ordering::Relaxed) {
        let pair = PAIR.read();
        if READERS_INSIDE.fetch_add(1, Ordering::SeqCst) > 0 {
            SHARED.fetch_add(1, Ordering::Relaxed);
        }
        thread::yield_now();
        if pair.0 != pair.1 {
            WRONG.fetch_add(1, Ordering::Relaxed);
        }
        READERS_INSIDE.fetch_sub(1, Ordering::SeqCst);
        drop(pair);
        READS.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// Writes the pair a half at a time, yielding between the halves, every millisecond: a writer
/// that waits must get in although the readers overlap.
fn write_pair() -> Result<(), CallError> {
    while !STOP.load(Ordering::Relaxed) {
        {
            let mut pair = PAIR.write();
            if READERS_INSIDE.load(Ordering::SeqCst) != 0 {
                WRONG.fetch_add(1, Ordering::Relaxed);
            }
            pair.0 += 1;
            thread::yield_now();
            pair.1 += 1;
        }
        WRITES.fetch_add(1, Ordering::Relaxed);
        thread::sleep(Duration::from_millis(1))?;
    }
    Ok(())
}

fn client(seconds: u64) -> Result<(), CallError> {
    let bodies: [fn() -> Result<(), CallError>; THREADS as usize] = [
        caller,
        caller,
        memory,
        || {
            take_turns(0);
            Ok(())
        },
        || {
            take_turns(1);
            Ok(())
        },
        || {
            while !STOP.load(Ordering::Relaxed) {
                thread::yield_now();
                YIELDS.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        },
        || {
            while !STOP.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(1))?;
                SLEEPS.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        },
        read_pair,
        read_pair,
        write_pair,
    ];
    let mut started = 0;
    for body in bodies {
        thread::spawn(move || {
            if let Err(e) = body() {
                println!("stress thread failed: {e:?}");
                WRONG.fetch_add(1, Ordering::Relaxed);
            }
            *DONE.lock() += 1;
            ALL_DONE.notify_all();
            0
        })?;
        started += 1;
    }
    thread::sleep(Duration::from_secs(seconds))?;
    STOP.store(true, Ordering::Relaxed);
    let mut done = DONE.lock();
    while *done < started {
        done = ALL_DONE.wait(done);
    }
    drop(done);
    println!(
        "stress client: calls {} wrong {} memory {} turns {} yields {} sleeps {} reads {} shared {} writes {}",
        CALLS.load(Ordering::Relaxed),
        WRONG.load(Ordering::Relaxed),
        MEMORY.load(Ordering::Relaxed),
        TURNS.load(Ordering::Relaxed),
        YIELDS.load(Ordering::Relaxed),
        SLEEPS.load(Ordering::Relaxed),
        READS.load(Ordering::Relaxed),
        SHARED.load(Ordering::Relaxed),
        WRITES.load(Ordering::Relaxed)
    );
    Ok(())
}

fn churn(seconds: u64) -> Result<(), CallError> {
    let remote: Portal<dyn IpcBench> = names::lookup("IpcBench")?;
    let spec = "name = \"Churned\"\nheap = \"2 MiB\"\ngrants = [\"domains\"]\n[[component]]\nname = \"test-stress\"\nargs = \"forever\"\n";
    let end = now_ns() + seconds * 1_000_000_000;
    let mut children = 0u64;
    while now_ns() < end {
        let child = Child::create::<dyn IpcBench>(spec, None)?;
        child.provide("IpcBench", &remote)?;
        child.start()?;
        thread::sleep(Duration::from_millis(2))?;
        child.terminate()?;
        children += 1;
    }
    println!("stress churn: {children} children");
    Ok(())
}

fn forever() -> Result<(), CallError> {
    let other = thread::spawn(|| {
        let _ = caller();
        0
    })?;
    caller()?;
    other.join().map(|_| ())
}
