//! Handle tables: a domain's capabilities.
//!
//! A handle is an index into its domain's table plus a generation, so a guessed, forged or
//! stale handle (one whose slot was freed and reused) is recognised and refused. Handles are
//! positive `i32`s: `generation << 16 | (slot + 1)`. The table is generic over what it holds;
//! a domain's holds `domain::T`.

use domos_abi::HostError;

/// Most handles a domain may hold at once.
pub const MAX_HANDLES: usize = 0xffff;

struct Slot<T> {
    generation: u16,
    object: Option<T>,
}

/// One domain's capabilities.
pub struct HandleTable<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Default for HandleTable<T> {
    fn default() -> Self {
        HandleTable { slots: Vec::new(), free: Vec::new() }
    }
}

impl<T> HandleTable<T> {
    /// Stores `object`; returns its new handle.
    ///
    /// # Errors
    /// `QuotaExceeded` when the table is full.
    pub fn insert(&mut self, object: T) -> Result<u32, HostError> {
        let index = match self.free.pop() {
            Some(index) => index,
            None if self.slots.len() < MAX_HANDLES => {
                self.slots.push(Slot { generation: 0, object: None });
                (self.slots.len() - 1) as u32
            }
            None => return Err(HostError::QuotaExceeded),
        };
        let slot = &mut self.slots[index as usize];
        slot.generation = (slot.generation + 1) & 0x7fff;
        slot.object = Some(object);
        Ok((u32::from(slot.generation) << 16) | (index + 1))
    }

    fn slot(&self, handle: u32) -> Option<(usize, &T)> {
        let index = (handle & 0xffff).checked_sub(1)? as usize;
        let slot = self.slots.get(index)?;
        if u32::from(slot.generation) != handle >> 16 {
            return None;
        }
        Some((index, slot.object.as_ref()?))
    }

    /// The object behind `handle`.
    ///
    /// # Errors
    /// `InvalidHandle` when the handle was not issued by this table or was dropped.
    pub fn get(&self, handle: u32) -> Result<&T, HostError> {
        self.slot(handle).map(|(_, object)| object).ok_or(HostError::InvalidHandle)
    }

    /// Removes `handle`; returns its object so the caller can drop it outside any lock.
    ///
    /// # Errors
    /// `InvalidHandle` for a bad handle.
    pub fn remove(&mut self, handle: u32) -> Result<T, HostError> {
        let (index, _) = self.slot(handle).ok_or(HostError::InvalidHandle)?;
        let object = self.slots[index].object.take().ok_or(HostError::InvalidHandle)?;
        self.free.push(index as u32);
        Ok(object)
    }

    /// Whether one more handle fits.
    pub fn has_room(&self) -> bool {
        self.has_room_for(1)
    }

    /// Whether `count` more handles fit.
    pub fn has_room_for(&self, count: usize) -> bool {
        self.free.len() + (MAX_HANDLES - self.slots.len()) >= count
    }

    /// Number of live handles.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects held.
    pub fn objects(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(|slot| slot.object.as_ref())
    }

    /// Empties the table; returns the objects so they are dropped outside any lock.
    pub fn take_all(&mut self) -> Vec<T> {
        self.free.clear();
        self.slots.drain(..).filter_map(|s| s.object).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forged_and_stale_handles_are_refused() {
        let mut table = HandleTable::default();
        let first = table.insert("first").unwrap();
        assert_eq!(table.get(first), Ok(&"first"));
        for forged in [0, first + 1, first ^ (1 << 16), 0xdead_beef, u32::MAX] {
            assert_eq!(table.get(forged), Err(HostError::InvalidHandle), "{forged:#x}");
        }
        assert_eq!(table.remove(first), Ok("first"));
        assert_eq!(table.remove(first), Err(HostError::InvalidHandle), "removed once only");
        let second = table.insert("second").unwrap();
        assert_eq!(second & 0xffff, first & 0xffff, "the slot is reused");
        assert!(table.get(first).is_err(), "but the stale handle stays invalid");
        assert_eq!(table.len(), 1);
        assert_eq!(table.take_all(), vec!["second"]);
        assert!(table.is_empty());
    }

    #[test]
    fn a_full_table_refuses_and_recovers_a_freed_slot() {
        let mut table = HandleTable::default();
        let handles: Vec<u32> = (0..MAX_HANDLES).map(|i| table.insert(i).unwrap()).collect();
        assert!(!table.has_room());
        assert_eq!(table.insert(0), Err(HostError::QuotaExceeded));
        table.remove(handles[7]).unwrap();
        assert!(table.has_room() && table.has_room_for(1) && !table.has_room_for(2));
        let again = table.insert(7).unwrap();
        assert_ne!(again, handles[7], "a new generation");
        assert_eq!(table.get(again), Ok(&7));
    }

    /// Generations wrap within 15 bits, so handles stay positive `i32`s.
    #[test]
    fn handles_stay_positive_across_many_generations() {
        let mut table = HandleTable::default();
        for i in 0..70_000u32 {
            let handle = table.insert(i).unwrap();
            assert!(i32::try_from(handle).is_ok(), "{handle:#x}");
            table.remove(handle).unwrap();
        }
    }
}
