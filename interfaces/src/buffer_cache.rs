//! `BufferCache`: a disk seen through a fixed-capacity cache of blocks, addressed in bytes (as
//! the ext2 code addresses its device).

use alloc::vec::Vec;
use domos_sdk::{CallError, Memory, ReadOnlyMemory, Wire, interface};

/// What the cache did, for reports and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Wire)]
pub struct CacheStatistics {
    /// Block lookups answered from the cache.
    pub hits: u64,
    /// Block lookups that read the disk.
    pub misses: u64,
    /// Dirty blocks written back (at eviction or sync).
    pub write_backs: u64,
    /// Blocks the cache holds at most.
    pub capacity: u64,
    /// Hits answered while another call waited for the disk (version 1.4).
    pub hits_beside_disk: u64,
}

/// A write-back block cache over a `BlockIO` disk. Its services wait for the disk, so it is
/// called by threads or by services that may wait themselves (`services_wait`).
///
/// Version 1.1 added `read_into`, 1.2 `writable_view` and `written`, 1.3 `sync_range`, 1.4
/// `CacheStatistics::hits_beside_disk` (at the end, so a 1.3 client decodes it as before).
#[interface(version = "1.4")]
pub trait BufferCache {
    /// Bytes per cache block.
    fn block_size(&self) -> Result<u32, CallError>;
    /// The device's size in bytes.
    fn size(&self) -> Result<u64, CallError>;
    /// `len` bytes from byte `offset` of the device, through the cache.
    fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, CallError>;
    /// Puts `bytes` at byte `offset` of the device, in the cache: the disk gets them when their
    /// block is evicted or at `sync`.
    fn write(&self, offset: u64, bytes: &[u8]) -> Result<(), CallError>;
    /// Copies `len` bytes from byte `offset` of the device, through the cache, into `memory`
    /// from its offset 0, without passing through a message or either side's heap (each block
    /// goes from the cache's memory into `memory` in one copy).
    fn read_into(&self, offset: u64, len: u64, memory: Memory) -> Result<(), CallError>;
    /// Cache block `block` itself, without a copy: a read-only view of its place in the cache,
    /// valid until the cache evicts the block, when the cache revokes it (reads then fail with
    /// `Revoked`, and the caller asks again).
    fn view(&self, block: u64) -> Result<ReadOnlyMemory, CallError>;
    /// Cache block `block` itself, writable (read from the disk first if it is not cached): a
    /// writer puts its bytes straight into the cache's memory instead of sending them
    /// (`write`). The cache learns which blocks changed only from `written`, which the writer
    /// must call before any other call to the cache, since that call may evict them unwritten.
    /// Revoked when the cache evicts the block, as a `view` is.
    fn writable_view(&self, block: u64) -> Result<Memory, CallError>;
    /// Blocks changed through writable views since the last call: dirty now, written back at
    /// eviction or `sync`. Blocks the cache no longer holds are ignored (their views were
    /// revoked when they left, so nothing reached them since).
    fn written(&self, blocks: Vec<u64>) -> Result<(), CallError>;
    /// Blocks the caller will need soon (at most 128 count): with `policy=graft`, the
    /// page-eviction graft spares them when it picks a block to evict. Replaces earlier hints.
    fn hint(&self, blocks: Vec<u64>) -> Result<(), CallError>;
    /// Writes every dirty block back and flushes the disk.
    fn sync(&self) -> Result<(), CallError>;
    /// Writes the dirty blocks holding the `len` bytes at byte `offset` back (with any dirty
    /// blocks that follow them in one request, as at eviction) and flushes the disk: those
    /// bytes reach it before anything written after the call. Other dirty blocks stay.
    fn sync_range(&self, offset: u64, len: u64) -> Result<(), CallError>;
    /// Hits, misses and write-backs so far.
    fn statistics(&self) -> Result<CacheStatistics, CallError>;
}
