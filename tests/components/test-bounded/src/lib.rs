//! `test-bounded`: handlers the loader must prove finish in bounded time.
//!
//! Its manifest lists the `bounded_*` exports under `bounded`, so the kernel refuses the
//! component unless `domos_kernel::bounded` accepts each of them as rustc compiled it: a
//! `for i in 0..16` loop, a sum and a fill over a fixed-size array, a small call chain and two
//! nested loops. It serves and uses no portal; `main` calls each handler once and prints the
//! results. With the argument `ticks N`, it instead attaches a 2 ms timer whose bounded
//! `domos_interrupt` handler counts the ticks and wakes `main`, which waits for N of them.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use core::hint::black_box;
use core::sync::atomic::{AtomicU32, Ordering};
use domos_sdk::{CallError, println};

domos_sdk::component! { main: main, interrupt: on_tick }

/// Ticks the interrupt handler counted, and the atomic variable it wakes `main` through.
static TICKS: AtomicU32 = AtomicU32::new(0);
static WAKE: AtomicU32 = AtomicU32::new(0);

/// The interrupt handler: straight-line code and one non-blocking host call.
fn on_tick(_source: u32, events: u32) {
    let total = TICKS.fetch_add(events, Ordering::AcqRel).wrapping_add(events);
    domos_sys::atomic_set_and_unblock(WAKE.load(Ordering::Acquire), total, 1);
}

fn ticks(wanted: u32) -> Result<(), CallError> {
    let wake = domos_sdk::sync::AtomicVariable::new(0)?;
    WAKE.store(wake.handle(), Ordering::Release);
    let start = domos_sdk::time::now_ns();
    let source = domos_sdk::interrupt::attach_timer(core::time::Duration::from_millis(2))?;
    loop {
        let seen = wake.get()?;
        if seen >= wanted {
            break;
        }
        wake.block_if_equal(seen)?;
    }
    domos_sdk::interrupt::detach(source)?;
    let ms = (domos_sdk::time::now_ns() - start) / 1_000_000;
    println!("{wanted} ticks handled by the interrupt thread in {ms} ms (at least {} ms)", 2 * wanted);
    Ok(())
}

/// The fixed-size array the handlers read and write.
static TABLE: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];

/// `for i in 0..16`, with a body too large for LLVM to unroll the loop completely.
#[expect(unsafe_code, reason = "an unmangled export is how the kernel finds a handler")]
#[unsafe(no_mangle)]
pub extern "C" fn bounded_rounds(seed: u32) -> u32 {
    let mut acc = seed;
    for i in 0..16usize {
        let entry = TABLE[(i * 3) % TABLE.len()].load(Ordering::Relaxed);
        acc = acc.rotate_left(5) ^ entry.wrapping_mul(0x9e37_79b9);
        acc = if acc & 1 == 0 { acc.wrapping_mul(acc | 1) } else { acc ^ (acc >> 7) };
        TABLE[(i * 5) % TABLE.len()].store(acc, Ordering::Relaxed);
    }
    acc
}

/// The sum of a fixed-size array.
#[expect(unsafe_code, reason = "an unmangled export is how the kernel finds a handler")]
#[unsafe(no_mangle)]
pub extern "C" fn bounded_table_sum() -> u32 {
    TABLE.iter().fold(0u32, |sum, entry| sum.wrapping_add(entry.load(Ordering::Relaxed)))
}

/// Fills the fixed-size array from `seed`.
#[expect(unsafe_code, reason = "an unmangled export is how the kernel finds a handler")]
#[unsafe(no_mangle)]
pub extern "C" fn bounded_table_fill(seed: u32) {
    for (i, entry) in TABLE.iter().enumerate() {
        entry.store(seed.wrapping_mul(i as u32 + 1), Ordering::Relaxed);
    }
}

#[inline(never)]
fn leaf(x: u32) -> u32 {
    let mut acc = x;
    for i in 0..100usize {
        acc = acc.wrapping_mul(3) ^ TABLE[i % TABLE.len()].load(Ordering::Relaxed);
    }
    acc
}

#[inline(never)]
fn middle(x: u32) -> u32 {
    leaf(x) ^ leaf(x.rotate_left(3))
}

/// A small call chain: `bounded_chain` calls `middle` and `leaf`, `middle` calls `leaf` twice.
#[expect(unsafe_code, reason = "an unmangled export is how the kernel finds a handler")]
#[unsafe(no_mangle)]
pub extern "C" fn bounded_chain(x: u32) -> u32 {
    middle(x).wrapping_add(leaf(x))
}

/// Two nested loops over the array.
#[expect(unsafe_code, reason = "an unmangled export is how the kernel finds a handler")]
#[unsafe(no_mangle)]
pub extern "C" fn bounded_nested(x: u32) -> u32 {
    let mut acc = x;
    for round in 0..8u32 {
        for entry in &TABLE {
            acc = acc.rotate_left(round).wrapping_add(entry.load(Ordering::Relaxed) ^ round);
        }
    }
    acc
}

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let mut words = args.split_whitespace();
    if words.next() == Some("ticks") {
        return ticks(words.next().and_then(|w| w.parse().ok()).unwrap_or(10));
    }
    bounded_table_fill(black_box(7));
    let rounds = bounded_rounds(black_box(1));
    let results = (bounded_table_sum(), bounded_chain(black_box(2)), bounded_nested(black_box(3)));
    println!("bounded handlers ran: {rounds:#x} {results:x?}");
    Ok(())
}
