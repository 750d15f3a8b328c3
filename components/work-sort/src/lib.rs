//! `work-sort`: a memory-hungry workload for sandboxes.
//!
//! Generates `n` pseudo-random 64-bit numbers into a vector grown one element at a time, sorts
//! them with a stable sort (which allocates a buffer of half their size) and checks the order.
//! Its heap peaks at roughly 2.5 × 8 × n bytes, grown page by page through the kernel, so it
//! also measures what memory accounting costs. Argument: `n=N` (default 100000).
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;
use domos_sdk::{CallError, println};

domos_sdk::component! { main: main }

fn main() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let n: usize =
        args.split_whitespace().find_map(|a| a.strip_prefix("n=")).and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let start = domos_sdk::time::now_ns();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut numbers = Vec::new();
    for _ in 0..n {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        numbers.push(seed);
    }
    numbers.sort();
    let sorted = numbers.windows(2).all(|w| w[0] <= w[1]);
    let checksum = numbers.iter().fold(0u64, |acc, x| acc.rotate_left(5) ^ x);
    let elapsed = domos_sdk::time::now_ns() - start;
    println!("sorted {n} numbers: in order {sorted}, checksum {checksum:#x}");
    println!("bench work_sort {elapsed}");
    Ok(())
}
