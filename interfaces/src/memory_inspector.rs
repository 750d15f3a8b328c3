//! `MemoryInspector`: a service that works on memory objects it is handed.

use alloc::vec::Vec;
use domos_sdk::{CallError, Memory, ReadOnlyMemory, interface};

/// Reads and writes memory objects in place; used to show and time sharing without copying.
#[interface(version = "1.0")]
pub trait MemoryInspector {
    /// The sum of every byte of `memory`, read where it lies.
    fn checksum(&self, memory: ReadOnlyMemory) -> Result<u64, CallError>;
    /// Writes `value` at `offset` of `memory`, which the caller then sees.
    fn stamp(&self, memory: Memory, offset: u64, value: u32) -> Result<(), CallError>;
    /// Keeps `memory` for later calls of `peek`.
    fn keep(&self, memory: Memory) -> Result<(), CallError>;
    /// The `u32` at `offset` of the kept memory.
    fn peek(&self, offset: u64) -> Result<u32, CallError>;
    /// The first word of `memory`: the cost of passing a memory object.
    fn first_word(&self, memory: ReadOnlyMemory) -> Result<u32, CallError>;
    /// The first byte of `bytes`: the cost of passing the same bytes copied in the message.
    fn first_byte(&self, bytes: Vec<u8>) -> Result<u32, CallError>;
}
