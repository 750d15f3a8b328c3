//! The three grafts of Small and Seltzer, "A Comparison of OS Extension Technologies" (1996):
//! a prioritisation graft ([`page_eviction`]), a stream graft ([`md5`]) and a black-box graft
//! ([`logical_disk`]).
//!
//! The same Rust source runs natively (in `domos bench grafts`) and as WebAssembly inside a
//! Domos domain (`components/bench-grafts`); `c/` holds the same algorithms in C, the paper's
//! baseline. Every workload is deterministic: its inputs come from [`Xorshift`] with a fixed
//! seed, and every run ends in a checksum, so the technologies can be checked against each
//! other before their times are compared.
#![no_std]

extern crate alloc;

pub mod logical_disk;
pub mod md5;
pub mod page_eviction;

/// Marsaglia's xorshift64: the inputs of every workload, identical wherever they are made.
#[derive(Debug, Clone)]
pub struct Xorshift(u64);

impl Xorshift {
    /// A generator; a zero seed is replaced, since xorshift would stay at zero.
    pub fn new(seed: u64) -> Self {
        Xorshift(if seed == 0 { 0x9e37_79b9_7f4a_7c15 } else { seed })
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..bound` (modulo bias is irrelevant here).
    pub fn below(&mut self, bound: u32) -> u32 {
        ((self.next_u64() >> 32) % u64::from(bound)) as u32
    }
}

/// An array of `N` copies of `value` on the heap, made without passing through the stack (a
/// guest's stack is small). Fixed-size arrays indexed modulo a power of two let the compiler
/// drop bounds checks, as C's unchecked arrays do, without `unsafe`.
pub(crate) fn boxed_array<T: Copy, const N: usize>(value: T) -> alloc::boxed::Box<[T; N]> {
    let slice = alloc::vec![value; N].into_boxed_slice();
    slice.try_into().unwrap_or_else(|_| unreachable!("a vector of N elements converts"))
}

/// Folds `value` into the running checksum `sum` (FNV-1a over 32-bit words); the C baseline
/// folds its results the same way.
pub fn fold(sum: u64, value: u32) -> u64 {
    (sum ^ u64::from(value)).wrapping_mul(0x0000_0100_0000_01b3)
}

/// The starting value of [`fold`].
pub const FOLD_START: u64 = 0xcbf2_9ce4_8422_2325;
