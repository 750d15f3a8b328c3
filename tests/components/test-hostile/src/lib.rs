//! `test-hostile`: a component that misbehaves on purpose.
//!
//! Its argument picks the behaviour:
//! * `trap` — panics, which traps; `recurse` — recurses until the wasm stack overflows;
//!   `big-frames` — recurses with 4 KiB of shadow stack per call until it overflows its region;
//! * `hog` — allocates until the heap quota refuses;
//! * `spin` — loops forever in its main thread;
//! * `forge` — calls portals through guessed and stale handles;
//! * `buffer` — reaches for its thread's message buffer while it is lent: a second lend, a raw
//!   call, a portal call from inside a request's encoding, a call after a leaked lend;
//! * `flood KEY` — sends a value bigger than the receiving domain's per-call quota to `KeyValueStore`;
//! * `serve-spin` — serves `IpcBench` under the name `Spinner`, whose `null` never returns;
//! * `call-spinner` — calls `Spinner` and reports how the call ended;
//! * `call-spinner-threads N` — asks `Spinner` to run 150 ms (`measure("busy 150")`), past
//!   a time slice, then starts N threads that each call its `null` and report how it ended;
//! * `block-forever` — one thread blocks on an atomic variable nobody sets, another sleeps for
//!   an hour, and main waits for both;
//! * `order` — three threads with priorities 0, 5 and 1 each compute for ten 3 ms chunks and
//!   log each chunk; prints the log (`order ABC…`), which shows the local scheduler's order;
//! * `attach-timer` — asks for a timer interrupt without a bounded handler and reports the
//!   refusal;
//! * `contend N` — eight threads add to one counter under a `Mutex` N times each, main waits
//!   on a `Condvar` until all are done and prints the total; then times a 20 ms sleep.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use domos_interfaces::ipc_bench::IpcBench;
use domos_interfaces::key_value_store::{KeyValueStore, KvError};
use domos_interfaces::table::{Table, TableInfo};
use domos_sdk::sync::AtomicVariable;
use domos_sdk::wire::{DecodeError, Decoder, EncodeError, Encoder, Wire};
use domos_sdk::{CallError, Condvar, HostError, Interface, Mutex, Portal, names, println, thread};

domos_sdk::component! { init: init, main: main }

/// A request whose encoding makes a portal call of its own, which would overwrite the message
/// being encoded in the thread's one buffer: it is refused, and the outer call goes through.
struct CallsWhileEncoded(Portal<dyn KeyValueStore>);

impl Wire for CallsWhileEncoded {
    fn encode(&self, _: &mut Encoder<'_>) -> Result<(), EncodeError> {
        println!("call while encoding: {:?}", self.0.tables().map(|t| t.len()));
        Ok(())
    }

    fn decode(_: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Err(DecodeError::Invalid)
    }
}

/// Writes `message` at the start of this thread's message buffer and calls `method` of `handle`
/// with its first `len` bytes (which may run past the message, or past the buffer).
fn raw_call(handle: u32, method: u32, message: &[u8], len: u32) -> i64 {
    let buffer = domos_sys::MessageBuffer::of_this_thread();
    if let Some(mut bytes) = buffer.lend() {
        bytes[..message.len()].copy_from_slice(message);
    }
    buffer.portal_call(handle, method, len).unwrap_or(HostError::NotPermitted as i64)
}

fn init() -> Result<(), CallError> {
    match domos_sdk::args().trim() {
        "serve-spin" | "serve-relay" => names::register("Spinner", &Spinner.into_portal())?,
        "squat" => {
            // Before the real store's init, if boot order allows: take its name.
            let taken = names::register("KeyValueStore", &Spinner.into_portal());
            println!("squat KeyValueStore: {}", taken.map_or_else(|e| alloc::format!("{e}"), |()| "taken".into()));
        }
        "init-spin" => {
            // An init that never returns: the boot must go on without this domain.
            let mut n = 0u64;
            loop {
                n = core::hint::black_box(n.wrapping_add(1));
            }
        }
        _ => {}
    }
    Ok(())
}

#[expect(unconditional_recursion, clippy::only_used_in_recursion, reason = "overflowing the stack is the point")]
fn recurse(depth: u64) -> u64 {
    core::hint::black_box(recurse(depth + 1)) + 1
}

/// Keeps 4 KiB per call on the shadow stack: an array whose address escapes.
#[expect(unconditional_recursion, reason = "overflowing the shadow stack is the point")]
#[inline(never)]
fn big_frames(depth: u64) -> u64 {
    let frame = core::hint::black_box([depth as u8; 4096]);
    core::hint::black_box(big_frames(depth + 1)) + u64::from(frame[4095])
}

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let mut words = args.split_whitespace();
    match words.next().unwrap_or("") {
        "trap" => panic!("deliberate trap"),
        "recurse" => {
            println!("depth {}", recurse(0));
        }
        "big-frames" => {
            println!("depth {}", big_frames(0));
        }
        "hog" => {
            let mut held: Vec<Vec<u8>> = Vec::new();
            loop {
                held.push(vec![1u8; 256 * 1024]);
                if held.len().is_multiple_of(4) {
                    println!("holding {} KiB", held.len() * 256);
                }
            }
        }
        "block-forever" => {
            let blocker = thread::spawn(|| {
                let never = AtomicVariable::new(0);
                i32::from(never.and_then(|v| v.block_if_equal(0)).is_err())
            })?;
            let sleeper = thread::spawn(|| i32::from(thread::sleep(core::time::Duration::from_secs(3600)).is_err()))?;
            println!("blocked");
            blocker.join()?;
            sleeper.join()?;
        }
        "order" => order()?,
        "attach-timer" => {
            let refused = domos_sdk::interrupt::attach_timer(core::time::Duration::from_millis(5)).err();
            println!(
                "timer without a bounded handler: {}",
                refused.map_or(String::from("accepted"), |e| alloc::format!("{e}"))
            );
        }
        "contend" => contend(words.next().and_then(|w| w.parse().ok()).unwrap_or(10_000))?,
        "names" => {
            // Publish names without end: the kernel stops this domain, not its own memory.
            let portal = Spinner.into_portal();
            let mut published = 0;
            let refusal = loop {
                match names::register(&alloc::format!("squat/{published}"), &portal) {
                    Ok(()) => published += 1,
                    Err(e) => break e,
                }
                if published > 10_000 {
                    break CallError::Host(HostError::InvalidArgument);
                }
            };
            println!("names published until refused: {published} ({refusal})");
        }
        "spin" => {
            let mut n = 0u64;
            loop {
                n = core::hint::black_box(n.wrapping_add(1));
            }
        }
        "buffer" => {
            // Ways safe code might reach its thread's message buffer twice; each is refused.
            let buffer = domos_sys::MessageBuffer::of_this_thread();
            let lent = buffer.lend();
            println!("lent twice: {}", if buffer.lend().is_some() { "lent" } else { "refused" });
            println!("raw call while lent: {:?}", buffer.portal_call(0, 0, 0));
            drop(lent);
            let store: Portal<dyn KeyValueStore> = names::lookup("KeyValueStore")?;
            let outer: Result<Result<Vec<TableInfo>, KvError>, CallError> =
                store.call_remote(domos_sdk::rt::fnv1a(b"tables"), &CallsWhileEncoded(names::lookup("KeyValueStore")?));
            println!("the call around it: {}", if matches!(outer, Ok(Ok(_))) { "answered" } else { "failed" });
            core::mem::forget(buffer.lend());
            println!("call after a leaked lend: {:?}", store.tables().map(|t| t.len()));
        }
        "forge" => {
            // Message: empty payload, no handles.
            let empty = [0u8; 8];
            for handle in [0u32, 1, 7, 0x0001_0001, 0x7fff_ffff, 0xdead_beef] {
                let result = raw_call(handle, 0, &empty, 8);
                let error = HostError::from_code(result).map_or("accepted", HostError::describe);
                println!("forged handle {handle:#x}: {error}");
            }
            let id = <dyn KeyValueStore as Interface>::ID;
            let stale = domos_sys::name_lookup("KeyValueStore", id);
            domos_sys::handle_drop(stale as u32);
            let result = raw_call(stale as u32, 0, &empty, 8);
            println!("dropped handle: {}", HostError::from_code(result).map_or("accepted", HostError::describe));
            let wrong = domos_sys::name_lookup("KeyValueStore", id ^ 1);
            println!(
                "lookup with the wrong interface: {}",
                HostError::from_code(wrong).map_or("accepted", HostError::describe)
            );
            let live = domos_sys::name_lookup("KeyValueStore", id) as u32;
            // A payload length that runs past the message.
            let malformed = raw_call(live, 0, &[200, 0, 0, 0, 0, 0, 0, 0], 8);
            println!("malformed message: {}", HostError::from_code(malformed).map_or("accepted", HostError::describe));
            // A message longer than the per-call quota.
            let huge = raw_call(live, 0, &[], 1 << 30);
            println!("oversized message: {}", HostError::from_code(huge).map_or("accepted", HostError::describe));
            // The same handle listed twice: refused as a whole, and the handle stays ours.
            let mut twice = [0u8; 16];
            twice[4..8].copy_from_slice(&2u32.to_le_bytes());
            twice[8..12].copy_from_slice(&live.to_le_bytes());
            twice[12..16].copy_from_slice(&live.to_le_bytes());
            let result = raw_call(live, 0, &twice, 16);
            println!(
                "a handle listed twice: {}; still ours: {}",
                HostError::from_code(result).map_or("accepted", HostError::describe),
                domos_sys::handle_dup(live) >= 0
            );
        }
        "flood" => {
            let store: Portal<dyn KeyValueStore> = names::lookup("KeyValueStore")?;
            let Ok(table) = store.open(String::from("flood")) else {
                println!("cannot open the table");
                return Ok(());
            };
            let size: usize = words.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
            let value = String::from_utf8(vec![b'x'; size]).unwrap_or_default();
            match table.put(String::from("big"), value) {
                Ok(_) => println!("flood of {size} bytes accepted"),
                Err(e) => println!("flood of {size} bytes refused: {e:?}"),
            }
            println!("table still answers: {:?}", table.info().map(|i| i.entries));
        }
        "fuzz" => {
            // Random messages, lengths, methods and handle lists at a live service.
            let id = <dyn KeyValueStore as Interface>::ID;
            let live = domos_sys::name_lookup("KeyValueStore", id) as u32;
            let rounds: u32 = words.next().and_then(|w| w.parse().ok()).unwrap_or(20_000);
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            let (mut refused, mut answered) = (0u32, 0u32);
            for _ in 0..rounds {
                let len = (next() % 96) as usize;
                let mut message = vec![0u8; len];
                for byte in message.iter_mut() {
                    *byte = next() as u8;
                }
                if len >= 8 && next() % 2 == 0 {
                    // Often a plausible header: small payload length, a few (maybe real) handles.
                    let payload = (next() % (len as u64 - 7)) as u32;
                    message[..4].copy_from_slice(&payload.to_le_bytes());
                    if next() % 2 == 0 {
                        // Sometimes a well-framed message (no handles), so the random payload
                        // reaches the service's decoder.
                        let payload = len as u32 - 8;
                        message[..4].copy_from_slice(&payload.to_le_bytes());
                        message[len - 4..len].copy_from_slice(&0u32.to_le_bytes());
                    }
                }
                let methods = [0, 1, domos_sdk::rt::fnv1a(b"open"), domos_sdk::rt::fnv1a(b"tables"), next() as u32];
                let method = methods[(next() % 5) as usize];
                if raw_call(live, method, &message, len as u32) < 0 { refused += 1 } else { answered += 1 }
            }
            println!("fuzz: {refused} refused, {answered} answered");
            let store: Portal<dyn KeyValueStore> = names::lookup("KeyValueStore")?;
            println!("store still answers: {:?}", store.tables().map(|t| t.len()));
        }
        "memory" => {
            let describe = |code: i64| HostError::from_code(code).map_or("accepted", HostError::describe);
            let object = domos_sys::memory_create(1 << 16) as u32;
            let view = domos_sys::memory_read_only(object) as u32;
            println!("write through a read-only view: {}", describe(domos_sys::memory_write(view, 0, b"x")));
            println!("typed write through a read-only view: {}", describe(domos_sys::memory_set_u32(view, 0, 1)));
            println!("memory handle called as a portal: {}", describe(raw_call(object, 0, &[0; 8], 8)));
            let store = domos_sys::name_lookup("KeyValueStore", <dyn KeyValueStore as Interface>::ID) as u32;
            println!("portal used as memory: {}", describe(domos_sys::memory_get_u32(store, 0)));
            // Allocate memory objects until the quota refuses, give them back, allocate again.
            let mut held = Vec::new();
            loop {
                let handle = domos_sys::memory_create(1 << 20);
                if handle < 0 {
                    println!("memory objects until the quota refused: {} MiB ({})", held.len(), describe(handle));
                    break;
                }
                held.push(handle as u32);
            }
            held.drain(..).for_each(|h| {
                let _ = domos_sys::handle_drop(h);
            });
            let again = domos_sys::memory_create(1 << 20);
            println!("after dropping them: {}", if again >= 0 { "created again" } else { describe(again) });
        }
        "squat" => {
            // Publish a portal of an interface this component does not provide.
            let store = domos_sys::name_lookup("KeyValueStore", 0);
            let copied = domos_sys::name_register("copy", store as u32);
            println!(
                "republish KeyValueStore as copy: {}",
                HostError::from_code(copied).map_or("published", HostError::describe)
            );
        }
        "deep-call" => {
            let depth = words.next().and_then(|w| w.parse().ok()).unwrap_or(8000);
            let spinner: Portal<dyn IpcBench> = names::lookup("Spinner")?;
            call_deep(depth, depth, &spinner);
        }
        "relay" => {
            let relay: Portal<dyn IpcBench> = names::lookup("Relay")?;
            println!("relay 20: {:?}", relay.measure("relay 20"));
            println!("relay 5: {:?}", relay.measure("relay 5"));
        }
        "call-spinner-threads" => {
            let threads: u32 = words.next().and_then(|w| w.parse().ok()).unwrap_or(2);
            let spinner: Portal<dyn IpcBench> = names::lookup("Spinner")?;
            println!("the spinner ran {:?} ms and returned", spinner.measure("busy 150"));
            let mut started = Vec::new();
            for n in 0..threads {
                started.push(thread::spawn(move || {
                    let spinner: Result<Portal<dyn IpcBench>, _> = names::lookup("Spinner");
                    match spinner.and_then(|s| s.null()) {
                        Ok(()) => println!("thread {n}: spinner returned"),
                        Err(e) => println!("thread {n}: spinner call failed: {e}"),
                    }
                    0
                })?);
            }
            println!("{threads} threads call the spinner");
            for thread in started {
                thread.join()?;
            }
        }
        "call-spinner" => {
            let spinner: Portal<dyn IpcBench> = names::lookup("Spinner")?;
            println!("calling the spinner");
            match spinner.null() {
                Ok(()) => println!("spinner returned"),
                Err(e) => println!("spinner call failed: {e}"),
            }
        }
        _ => {}
    }
    Ok(())
}

/// `IpcBench` whose `null` never returns.
struct Spinner;

impl IpcBench for Spinner {
    fn null(&self) -> Result<(), CallError> {
        let mut n = 0u64;
        loop {
            n = core::hint::black_box(n.wrapping_add(1));
        }
    }
    fn add3(&self, a: u32, b: u32, c: u32) -> Result<u32, CallError> {
        Ok(a + b + c)
    }
    /// `recurse`: recurses until the stack overflows; `relay N`: asks the service bound as
    /// `Relay` for `relay N-1` and adds one, so two relays bound to each other nest N calls.
    fn measure(&self, text: &str) -> Result<u32, CallError> {
        if text == "recurse" {
            return Ok(recurse(0) as u32);
        }
        if let Some(ms) = text.strip_prefix("busy ").and_then(|ms| ms.parse::<u64>().ok()) {
            let until = domos_sdk::time::now_ns() + ms * 1_000_000;
            while domos_sdk::time::now_ns() < until {
                core::hint::spin_loop();
            }
            return Ok(ms as u32);
        }
        if let Some(n) = text.strip_prefix("relay ").and_then(|n| n.parse::<u32>().ok()) {
            if n == 0 {
                return Ok(0);
            }
            let relay: Portal<dyn IpcBench> = names::lookup("Relay")?;
            return relay.measure(&alloc::format!("relay {}", n - 1)).map(|depth| depth + 1);
        }
        Ok(text.len() as u32)
    }
}

/// Recurses `depth` frames deep, then asks the spinner service to overflow its own stack and
/// reports how that ended (printing at the bottom keeps the frames small: the result of a call
/// would travel back through the shadow stack).
#[inline(never)]
fn call_deep(depth: u32, of: u32, spinner: &Portal<dyn IpcBench>) -> u32 {
    if depth == 0 {
        match spinner.measure("recurse") {
            Ok(n) => println!("deep call returned {n}"),
            Err(e) => println!("deep call at {of} frames failed: {e}"),
        }
        return 0;
    }
    // Not a tail call: each level keeps a native frame.
    call_deep(core::hint::black_box(depth - 1), of, spinner) + core::hint::black_box(0)
}

/// The counter and the number of threads that finished adding to it.
static COUNTED: Mutex<(u64, u32)> = Mutex::new((0, 0));
static ALL_DONE: Condvar = Condvar::new();

fn contend(n: u64) -> Result<(), CallError> {
    const THREADS: u32 = 8;
    for _ in 0..THREADS {
        thread::spawn(move || {
            for _ in 0..n {
                let mut counted = COUNTED.lock();
                counted.0 = core::hint::black_box(counted.0) + 1;
            }
            COUNTED.lock().1 += 1;
            ALL_DONE.notify_all();
            0
        })?;
    }
    let mut counted = COUNTED.lock();
    while counted.1 < THREADS {
        counted = ALL_DONE.wait(counted);
    }
    println!("counted {} of {}", counted.0, u64::from(THREADS) * n);
    drop(counted);
    let start = domos_sdk::time::now_ns();
    thread::sleep(core::time::Duration::from_millis(20))?;
    let slept = (domos_sdk::time::now_ns() - start) / 1_000_000;
    println!("slept at least 20 ms: {}", (20..200).contains(&slept));
    Ok(())
}

/// Which thread finished each chunk of computation, in order.
static ORDER: Mutex<Vec<u8>> = Mutex::new(Vec::new());

fn order() -> Result<(), CallError> {
    let mut threads = Vec::new();
    for (name, priority) in [(b'A', 0), (b'B', 5), (b'C', 1)] {
        let thread = thread::spawn(move || {
            for _ in 0..10 {
                let until = domos_sdk::time::now_ns() + 3_000_000;
                while domos_sdk::time::now_ns() < until {
                    core::hint::spin_loop();
                }
                ORDER.lock().push(name);
            }
            0
        })?;
        thread.set_priority(priority)?;
        threads.push(thread);
    }
    for thread in threads {
        thread.join()?;
    }
    println!("order {}", String::from_utf8_lossy(&ORDER.lock()));
    Ok(())
}
