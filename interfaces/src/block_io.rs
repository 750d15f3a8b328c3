//! `BlockIO`: a disk in 512-byte sectors, with requests that complete asynchronously.
//!
//! A request names a memory object the data goes into or comes from (no copy through the
//! portal) and an atomic variable the driver sets to 1 when the request succeeded or 2 when it
//! failed, waking the caller blocked on it. A service call may not block, so the caller waits in
//! its own thread: [`read`], [`write`] and [`flush`] below do the whole round.

use domos_sdk::sync::AtomicVariable;
use domos_sdk::{CallError, HostError, Memory, Portal, ReadOnlyMemory, interface};

/// The value a request's variable holds until the request is done.
pub const PENDING: u32 = 0;
/// The value once it succeeded.
pub const DONE: u32 = 1;
/// The value once it failed.
pub const FAILED: u32 = 2;

/// A block device driver.
#[interface(version = "1.0")]
pub trait BlockIO {
    /// The disk's size in 512-byte sectors.
    fn sectors(&self) -> Result<u64, CallError>;
    /// Starts reading `count` sectors from `sector` into `memory` (from its offset 0).
    fn read(&self, sector: u64, count: u32, memory: Memory, done: AtomicVariable) -> Result<(), CallError>;
    /// Starts writing `count` sectors from `sector` with the first bytes of `memory`.
    fn write(&self, sector: u64, count: u32, memory: ReadOnlyMemory, done: AtomicVariable) -> Result<(), CallError>;
    /// Starts making everything written so far durable.
    fn flush(&self, done: AtomicVariable) -> Result<(), CallError>;
}

/// Waits in this thread until the request `done` belongs to has finished.
fn wait(done: &AtomicVariable) -> Result<(), CallError> {
    loop {
        match done.get()? {
            PENDING => {
                done.block_if_equal(PENDING)?;
            }
            DONE => return Ok(()),
            _ => return Err(CallError::Host(HostError::BadRequest)),
        }
    }
}

/// Reads `count` sectors from `sector` into `memory` and waits for them.
///
/// # Errors
/// `BadRequest` when the disk failed the request; any error of the call.
pub fn read(disk: &Portal<dyn BlockIO>, sector: u64, count: u32, memory: Memory) -> Result<(), CallError> {
    let done = AtomicVariable::new(PENDING)?;
    disk.read(sector, count, memory, done.clone_handle()?)?;
    wait(&done)
}

/// Writes `count` sectors from `sector` with `memory` and waits for them.
///
/// # Errors
/// As [`read`].
pub fn write(disk: &Portal<dyn BlockIO>, sector: u64, count: u32, memory: ReadOnlyMemory) -> Result<(), CallError> {
    let done = AtomicVariable::new(PENDING)?;
    disk.write(sector, count, memory, done.clone_handle()?)?;
    wait(&done)
}

/// Flushes the disk and waits for it.
///
/// # Errors
/// As [`read`].
pub fn flush(disk: &Portal<dyn BlockIO>) -> Result<(), CallError> {
    let done = AtomicVariable::new(PENDING)?;
    disk.flush(done.clone_handle()?)?;
    wait(&done)
}
