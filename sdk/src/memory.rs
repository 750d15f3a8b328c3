//! Memory objects: kernel memory shared between domains without copying.
//!
//! A [`Memory`] is writable, a [`ReadOnlyMemory`] is not and can never become so. Both are
//! capabilities: passing one through a portal maps the same bytes into the receiver, and
//! [`Memory::revoke`] takes them back from every holder at once. Reads and writes copy between
//! the object and this component's heap (in bulk, or by typed accessors).

use domos_abi::{GatherPiece, HostError};

use crate::portal::{CallError, check};
use crate::wire::{DecodeError, Decoder, EncodeError, Encoder, Wire};

fn info(handle: u32) -> Result<(u64, bool), CallError> {
    let info = check(domos_sys::memory_info(handle))?;
    Ok(((info >> 2) as u64, info & 1 == 1))
}

/// What can be read from: either kind of memory object, or a type of the component's that holds
/// one (a source of [`Memory::copy_from`] and [`GatherList::push`]; a writable view serves as
/// well as a read-only one).
pub trait Readable {
    /// The object's kernel handle.
    fn memory_handle(&self) -> u32;
}

/// Operations shared by both kinds of memory object.
macro_rules! readable {
    ($name:ident) => {
        impl Readable for $name {
            fn memory_handle(&self) -> u32 {
                self.handle
            }
        }

        impl $name {
            /// Length in bytes.
            ///
            /// # Errors
            /// `Revoked`-free: only a dropped handle fails.
            pub fn len(&self) -> Result<u64, CallError> {
                info(self.handle).map(|(len, _)| len)
            }

            /// The kernel handle, for a driver handing the object to a device (`disk_submit`).
            pub fn handle(&self) -> u32 {
                self.handle
            }

            /// Whether the object has no bytes (never: objects have at least one).
            ///
            /// # Errors
            /// As `len`.
            pub fn is_empty(&self) -> Result<bool, CallError> {
                self.len().map(|len| len == 0)
            }

            /// Copies `out.len()` bytes at `offset` into `out`.
            ///
            /// # Errors
            /// `Revoked`, or `InvalidArgument` out of range.
            pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), CallError> {
                check(domos_sys::memory_read(self.handle, offset, out)).map(|_| ())
            }

            /// The little-endian `u32` at `offset`.
            ///
            /// # Errors
            /// `Revoked`, or `InvalidArgument` out of range.
            pub fn get_u32(&self, offset: u64) -> Result<u32, CallError> {
                check(domos_sys::memory_get_u32(self.handle, offset)).map(|v| v as u32)
            }

            /// A read-only view of `[offset, offset + len)`, revoked with this object.
            ///
            /// # Errors
            /// `Revoked`, or `InvalidArgument` out of range.
            pub fn read_only_subrange(&self, offset: u64, len: u64) -> Result<ReadOnlyMemory, CallError> {
                let sub = Memory { handle: check(domos_sys::memory_subrange(self.handle, offset, len))? as u32 };
                sub.read_only()
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                domos_sys::handle_drop(self.handle);
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, concat!(stringify!($name), "(handle {:#x})"), self.handle)
            }
        }
    };
}

/// A writable memory object.
pub struct Memory {
    handle: u32,
}

/// What [`Memory::gather`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gathered {
    /// Pieces it copied, from the first.
    pub copied: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// The pieces of one [`Memory::gather`], at most [`GatherList::MAX`], held in the list itself
/// (640 bytes), so that a caller makes one on its stack for each gather and nothing allocates.
pub struct GatherList {
    /// The pieces as the kernel reads them (`domos_abi::GatherPiece`, encoded), `len` of them.
    encoded: [u8; GatherList::MAX * GatherPiece::BYTES],
    len: usize,
}

impl GatherList {
    /// Most pieces in a list.
    pub const MAX: usize = GatherPiece::MAX;

    /// An empty list.
    pub const fn new() -> GatherList {
        GatherList { encoded: [0; GatherList::MAX * GatherPiece::BYTES], len: 0 }
    }

    /// Empties the list.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends `len` bytes at `offset` of `source`; false, appending nothing, when full.
    pub fn push(&mut self, source: &impl Readable, offset: u64, len: u64) -> bool {
        let at = self.len * GatherPiece::BYTES;
        let Some(slot) = self.encoded.get_mut(at..at + GatherPiece::BYTES) else {
            return false;
        };
        slot.copy_from_slice(&GatherPiece { source: source.memory_handle(), offset, len }.encode());
        self.len += 1;
        true
    }

    /// Pieces listed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no piece is listed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The listed pieces' bytes, as the kernel reads them.
    fn listed(&self) -> &[u8] {
        &self.encoded[..self.len * GatherPiece::BYTES]
    }

    /// The bytes of the first `count` pieces.
    fn bytes_of_first(&self, count: usize) -> u64 {
        let pieces = self.listed().as_chunks::<{ GatherPiece::BYTES }>().0;
        pieces.iter().take(count).map(|piece| GatherPiece::decode(piece).len).sum()
    }
}

impl Default for GatherList {
    fn default() -> Self {
        GatherList::new()
    }
}

/// A read-only memory object.
pub struct ReadOnlyMemory {
    handle: u32,
}

readable!(Memory);
readable!(ReadOnlyMemory);

impl Memory {
    /// A new object of `len` zeroed bytes, charged to this domain's quota.
    ///
    /// # Errors
    /// `QuotaExceeded`, or `InvalidArgument` for 0 or more than 1 GiB.
    pub fn new(len: u64) -> Result<Memory, CallError> {
        Ok(Memory { handle: check(domos_sys::memory_create(len))? as u32 })
    }

    /// The memory of the emulated device `name` (the domain needs the `devices` grant).
    ///
    /// # Errors
    /// `NotPermitted` or `NotFound`.
    pub fn device(name: &str) -> Result<Memory, CallError> {
        Ok(Memory { handle: check(domos_sys::memory_device(name))? as u32 })
    }

    /// Lends `buffer` (bytes of this component's heap) to others as a writable `Memory` while
    /// `body` runs: a service given it (or a copy: [`duplicate`](Self::duplicate)) writes into
    /// `buffer` itself, with no copy through a memory object of its own. The loan ends when
    /// `body` returns: every view of it is revoked, after any copy under way.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty buffer; `QuotaExceeded` when the handle table is full;
    /// `NotPermitted` in an interpreted domain, whose heap its one store owns.
    pub fn lend<R>(buffer: &mut [u8], body: impl FnOnce(&Memory) -> R) -> Result<R, CallError> {
        domos_sys::memory_lend(buffer, |handle| {
            // The loan's handle, dropped by `memory_lend` after the loan has ended.
            let lent = core::mem::ManuallyDrop::new(Memory { handle });
            body(&lent)
        })
        .map_err(|code| CallError::Host(HostError::from_code(code).unwrap_or(HostError::InvalidArgument)))
    }

    /// Another handle to the same view (a service that takes a `Memory` by value gets one),
    /// revoked with it.
    ///
    /// # Errors
    /// `InvalidHandle` for a dropped one; `QuotaExceeded` when the handle table is full.
    pub fn duplicate(&self) -> Result<Memory, CallError> {
        Ok(Memory { handle: check(domos_sys::handle_dup(self.handle))? as u32 })
    }

    /// Copies `bytes` to `offset`.
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` out of range.
    pub fn write(&self, offset: u64, bytes: &[u8]) -> Result<(), CallError> {
        check(domos_sys::memory_write(self.handle, offset, bytes)).map(|_| ())
    }

    /// Writes the little-endian `u32` at `offset`.
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` out of range.
    pub fn set_u32(&self, offset: u64, value: u32) -> Result<(), CallError> {
        check(domos_sys::memory_set_u32(self.handle, offset, value)).map(|_| ())
    }

    /// Copies `len` bytes at `src_offset` of `src` to `offset`, without passing through a heap.
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` out of range.
    pub fn copy_from(&self, offset: u64, src: &impl Readable, src_offset: u64, len: u64) -> Result<(), CallError> {
        check(domos_sys::memory_copy(self.handle, offset, src.memory_handle(), src_offset, len)).map(|_| ())
    }

    /// Copies the pieces of `list` (a source, an offset in it and a length each) one after
    /// another to `offset`, in one host call, up to the first that fails ([`copy_from`] of that
    /// one alone tells why).
    ///
    /// [`copy_from`]: Self::copy_from
    ///
    /// # Errors
    /// `InvalidHandle` for a dropped target.
    pub fn gather(&self, offset: u64, list: &GatherList) -> Result<Gathered, CallError> {
        if list.is_empty() {
            return Ok(Gathered { copied: 0, bytes: 0 });
        }
        let copied = check(domos_sys::memory_gather(self.handle, offset, list.listed(), list.len() as u32))? as usize;
        Ok(Gathered { copied, bytes: list.bytes_of_first(copied) })
    }

    /// A writable view of `[offset, offset + len)`, revoked with this object.
    ///
    /// # Errors
    /// `Revoked`, or `InvalidArgument` out of range.
    pub fn subrange(&self, offset: u64, len: u64) -> Result<Memory, CallError> {
        Ok(Memory { handle: check(domos_sys::memory_subrange(self.handle, offset, len))? as u32 })
    }

    /// A read-only view of the whole object, revoked with it.
    ///
    /// # Errors
    /// `Revoked`.
    pub fn read_only(&self) -> Result<ReadOnlyMemory, CallError> {
        Ok(ReadOnlyMemory { handle: check(domos_sys::memory_read_only(self.handle))? as u32 })
    }

    /// Takes the bytes back from every holder of this object (and of views derived from it);
    /// this `Memory` becomes a fresh handle to the same bytes.
    ///
    /// # Errors
    /// `Revoked` when someone revoked it first.
    pub fn revoke(&mut self) -> Result<(), CallError> {
        let fresh = check(domos_sys::memory_revoke(self.handle))? as u32;
        domos_sys::handle_drop(core::mem::replace(&mut self.handle, fresh));
        Ok(())
    }
}

impl Wire for Memory {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        e.handle(self.handle)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let memory = Memory { handle: d.handle()? };
        match info(memory.handle) {
            Ok((_, true)) => Ok(memory),
            _ => Err(DecodeError::Invalid),
        }
    }
}

impl Wire for ReadOnlyMemory {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        e.handle(self.handle)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let memory = ReadOnlyMemory { handle: d.handle()? };
        info(memory.handle).map_err(|_| DecodeError::Invalid)?;
        Ok(memory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gather_list_holds_at_most_max_pieces_and_counts_their_bytes() {
        // Never dropped: dropping closes the handle, a host call.
        let source = core::mem::ManuallyDrop::new(ReadOnlyMemory { handle: 7 });
        let mut list = GatherList::new();
        assert!(list.is_empty());
        for piece in 0..GatherList::MAX as u64 {
            assert!(list.push(&*source, piece * 4096, 100 + piece), "piece {piece} fits");
        }
        assert!(!list.push(&*source, 0, 1), "one past the most is refused");
        assert_eq!(list.len(), GatherList::MAX);
        assert_eq!(list.bytes_of_first(0), 0);
        assert_eq!(list.bytes_of_first(3), 100 + 101 + 102);
        assert_eq!(list.bytes_of_first(GatherList::MAX), (0..GatherList::MAX as u64).map(|p| 100 + p).sum::<u64>());
        let encoded = list.encoded.as_chunks::<{ GatherPiece::BYTES }>().0;
        assert_eq!(GatherPiece::decode(&encoded[2]), GatherPiece { source: 7, offset: 8192, len: 102 });
        list.clear();
        assert!(list.is_empty());
        assert!(list.push(&*source, 0, 5));
        assert_eq!(list.bytes_of_first(GatherList::MAX), 5);
    }
}
