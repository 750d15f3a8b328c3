//! The table of the objects a module exports as services, read by every incoming portal call
//! without a lock or a reference count.
//!
//! Ids start at 1. Slots lie in chunks that are made once and never move or go away, so a look-up
//! is two loads. An object leaves the table only through [`ObjectTable::remove`], whose caller
//! promises that no call on it runs or will run: the kernel tells a component to release an
//! object only after every call on it has returned (each call holds the service), and never
//! passes an id whose release it delivered.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, Ordering};

use crate::Mutex;

/// Slots of a chunk.
const CHUNK: usize = 256;
/// Chunks of a table: as many ids as a domain's handle table has handles.
const CHUNKS: usize = 256;

type Chunk<T> = [AtomicPtr<Box<T>>; CHUNK];

/// Objects by id; see the module documentation.
pub struct ObjectTable<T: ?Sized> {
    chunks: [AtomicPtr<Chunk<T>>; CHUNKS],
    ids: Mutex<Ids>,
    /// The table owns its objects and lends them to every thread: it is `Send` and `Sync` only
    /// when they are (the slots alone would make it both).
    owns: PhantomData<Box<T>>,
}

/// Ids given out and given back, behind the table's lock.
struct Ids {
    next: u32,
    free: Vec<u32>,
}

impl<T: ?Sized + Send + Sync> ObjectTable<T> {
    /// An empty table.
    pub const fn new() -> Self {
        ObjectTable {
            chunks: [const { AtomicPtr::new(core::ptr::null_mut()) }; CHUNKS],
            ids: Mutex::new(Ids { next: 1, free: Vec::new() }),
            owns: PhantomData,
        }
    }

    /// Where id `id`'s slot lies, if its chunk was made.
    fn slot(&self, id: u32) -> Option<&AtomicPtr<Box<T>>> {
        let index = (id as usize).checked_sub(1)?;
        let chunk = self.chunks.get(index / CHUNK)?.load(Ordering::Acquire);
        // SAFETY: a chunk, once stored by `insert`, is neither freed nor moved while the table
        // lives.
        let chunk = unsafe { chunk.as_ref()? };
        Some(&chunk[index % CHUNK])
    }

    /// Records `object`; returns its id, or `None` when every id is taken.
    pub fn insert(&self, object: Box<T>) -> Option<u32> {
        let mut ids = self.ids.lock();
        let id = match ids.free.pop() {
            Some(id) => id,
            None if (ids.next as usize) <= CHUNK * CHUNKS => {
                ids.next += 1;
                ids.next - 1
            }
            None => return None,
        };
        let index = id as usize - 1;
        let chunk = &self.chunks[index / CHUNK];
        if chunk.load(Ordering::Acquire).is_null() {
            let made: Box<Chunk<T>> = Box::new([const { AtomicPtr::new(core::ptr::null_mut()) }; CHUNK]);
            chunk.store(Box::into_raw(made), Ordering::Release);
        }
        let slot = self.slot(id)?;
        slot.store(Box::into_raw(Box::new(object)), Ordering::Release);
        Some(id)
    }

    /// The object `id`, if it is in the table.
    pub fn get(&self, id: u32) -> Option<&T> {
        let object = self.slot(id)?.load(Ordering::Acquire);
        // SAFETY: a pointer in a slot comes from `Box::into_raw` in `insert` and stays valid
        // until `remove` takes it out, which its caller does only when no use of it is left.
        unsafe { object.as_ref().map(|boxed| &**boxed) }
    }

    /// Takes object `id` out of the table; its id may be given out again.
    ///
    /// # Safety
    /// No reference [`get`](Self::get) returned for `id` may be in use, on any thread, nor may
    /// `get` be called for `id` again before `insert` gives the id out anew.
    pub unsafe fn remove(&self, id: u32) -> Option<Box<T>> {
        let mut ids = self.ids.lock();
        let object = self.slot(id)?.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if object.is_null() {
            return None;
        }
        ids.free.push(id);
        // SAFETY: the pointer came from `Box::into_raw` in `insert`; the swap took it out of
        // the table, and the caller promises that no reference to it is left.
        Some(*unsafe { Box::from_raw(object) })
    }
}

impl<T: ?Sized> Drop for ObjectTable<T> {
    fn drop(&mut self) {
        for chunk in &mut self.chunks {
            let chunk = *chunk.get_mut();
            if chunk.is_null() {
                continue;
            }
            // SAFETY: a chunk comes from `Box::into_raw` in `insert`; the table is going away, so
            // nothing refers to it or to its objects any more (`&mut self`).
            let chunk = unsafe { Box::from_raw(chunk) };
            for slot in chunk.iter() {
                let object = slot.load(Ordering::Relaxed);
                if !object.is_null() {
                    // SAFETY: as above, for an object `insert` stored.
                    drop(unsafe { Box::from_raw(object) });
                }
            }
        }
    }
}

impl<T: ?Sized + Send + Sync> Default for ObjectTable<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::{CHUNK, CHUNKS, ObjectTable};
    use alloc::boxed::Box;

    #[test]
    fn ids_start_at_one_are_given_back_and_reach_every_chunk() {
        let table: ObjectTable<u32> = ObjectTable::new();
        assert_eq!(table.get(0), None);
        assert_eq!(table.get(1), None, "a slot of a chunk not made yet");
        assert_eq!(table.insert(Box::new(10)), Some(1));
        assert_eq!(table.insert(Box::new(20)), Some(2));
        assert_eq!((table.get(1), table.get(2), table.get(3)), (Some(&10), Some(&20), None));
        // SAFETY: no reference `get` returned is in use.
        assert_eq!(unsafe { table.remove(1) }.map(|b| *b), Some(10));
        // SAFETY: as above.
        assert_eq!(unsafe { table.remove(1) }, None, "removed once");
        assert_eq!(table.get(1), None);
        assert_eq!(table.insert(Box::new(30)), Some(1), "the id is given out again");
        for n in 3..=2 * CHUNK as u32 {
            assert_eq!(table.insert(Box::new(n)), Some(n));
        }
        assert_eq!(table.get(CHUNK as u32 + 1), Some(&(CHUNK as u32 + 1)), "the second chunk");
        assert_eq!(table.get(u32::MAX), None);
    }

    #[test]
    fn a_full_table_refuses_more_until_an_id_is_given_back() {
        let table: ObjectTable<u8> = ObjectTable::new();
        for _ in 0..CHUNK * CHUNKS {
            assert!(table.insert(Box::new(0)).is_some());
        }
        assert_eq!(table.insert(Box::new(0)), None);
        // SAFETY: no reference `get` returned is in use.
        drop(unsafe { table.remove(7) });
        assert_eq!(table.insert(Box::new(1)), Some(7));
    }
}
