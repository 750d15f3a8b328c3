//! Storage for a string or byte sequence that a service copies out of its message buffer, so
//! that an interface method can borrow it while the buffer serves the method's own calls.

use alloc::vec::Vec;
use core::mem::MaybeUninit;

/// Room for a copied argument: on the stack for up to [`ArgStorage::INLINE`] bytes (names and
/// paths), where nothing is written before the copy, and on the heap beyond. Keeping a value
/// borrows the storage, so it cannot move or be reused while the copy is in use.
pub struct ArgStorage {
    inline: [MaybeUninit<u8>; ArgStorage::INLINE],
    heap: Vec<u8>,
}

impl ArgStorage {
    /// The longest sequence kept without an allocation (an ext2 name is at most 255 bytes).
    pub const INLINE: usize = 256;

    /// Empty storage: nothing written, nothing allocated.
    #[inline]
    pub const fn new() -> Self {
        ArgStorage { inline: [MaybeUninit::uninit(); Self::INLINE], heap: Vec::new() }
    }

    /// Copies `bytes` in; the copy lives as long as this borrow of the storage.
    #[inline]
    pub fn keep_bytes(&mut self, bytes: &[u8]) -> &[u8] {
        match self.inline.get_mut(..bytes.len()) {
            Some(room) => {
                // SAFETY: `room` and `bytes` have the same length, and `[MaybeUninit<u8>]` has the
                // layout of `[u8]`; `room` belongs to `self`, which this call borrows mutably,
                // so it cannot overlap `bytes` (a shared borrow of other memory).
                unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), room.as_mut_ptr().cast::<u8>(), bytes.len()) };
                // SAFETY: the copy above initialised exactly these `bytes.len()` bytes; the slice
                // borrows `self`, so they stay alive and unchanged while it is used.
                unsafe { core::slice::from_raw_parts(room.as_ptr().cast::<u8>(), bytes.len()) }
            }
            None => {
                self.heap = bytes.to_vec();
                &self.heap
            }
        }
    }

    /// Copies `text` in; the copy lives as long as this borrow of the storage.
    #[inline]
    pub fn keep_str(&mut self, text: &str) -> &str {
        let bytes = self.keep_bytes(text.as_bytes());
        // SAFETY: `bytes` is an exact copy of `text`, which is UTF-8.
        unsafe { core::str::from_utf8_unchecked(bytes) }
    }
}

impl Default for ArgStorage {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::ArgStorage;

    #[test]
    fn keeps_short_and_long_values_byte_for_byte() {
        let mut storage = ArgStorage::new();
        assert_eq!(storage.keep_str("a b/\u{e9}"), "a b/\u{e9}");
        let long: alloc::vec::Vec<u8> = (0..=ArgStorage::INLINE as u32).map(|i| i as u8).collect();
        let mut storage = ArgStorage::new();
        assert_eq!(storage.keep_bytes(&long), &long[..]);
        let mut storage = ArgStorage::new();
        assert_eq!(storage.keep_bytes(&[]), &[] as &[u8]);
    }
}
