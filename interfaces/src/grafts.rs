//! `Grafts`: the three grafts of Small and Seltzer as a service in a domain of its own — the
//! paper's "user-level server with upcalls", called once per operation.

use alloc::vec::Vec;
use domos_sdk::{CallError, interface};

/// The application's half of each graft; the caller plays the kernel.
#[interface(version = "1.0")]
pub trait Grafts {
    /// Page eviction: the application touches its next page and the kernel offers `candidates`,
    /// the pages of its least recently used frames. Returns the index of the one to evict.
    fn choose_victim(&self, candidates: Vec<u32>) -> Result<u32, CallError>;
    /// MD5: feeds `data` into the digest being computed.
    fn md5_update(&self, data: Vec<u8>) -> Result<(), CallError>;
    /// MD5: the 16-byte digest of everything fed since the last digest.
    fn md5_finish(&self) -> Result<Vec<u8>, CallError>;
    /// Logical disk: writes logical block `block`; returns the physical block it went to.
    fn write_block(&self, block: u32) -> Result<u32, CallError>;
    /// Logical disk: writes `blocks` in order (a batch, such as a segment's worth); returns
    /// where each went.
    fn write_blocks(&self, blocks: Vec<u32>) -> Result<Vec<u32>, CallError>;
    /// Starts every graft afresh: the first hot list again, an empty logical disk.
    fn reset(&self) -> Result<(), CallError>;
}
