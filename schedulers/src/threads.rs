//! [`ThreadSet`]: the runnable threads of a local scheduler.

use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::{CAPACITY, MASK};

/// The first sequence number given at the back; those given at the front count down from just
/// below it, so front entries always order before back entries. Neither end runs out in 2^63
/// insertions.
const MIDDLE: u64 = 1 << 63;

/// A runnable thread as a [`ThreadSet`] holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The kernel's id of the thread (never 0).
    pub thread: u32,
    /// The priority the kernel reported with it.
    pub priority: i32,
    /// Its place in line: lower is nearer the front (see [`ThreadSet::push_back`] and
    /// [`ThreadSet::push_front`]).
    pub sequence: u64,
}

/// Up to [`CAPACITY`] runnable threads, each with its priority and its place in line.
///
/// Thread ids grow without bound, so entries live in slots, not at their id: a slot is free
/// when its thread is 0, and the free slots are kept on a stack so that an insertion takes no
/// loop. The kernel reports a thread it already reported, and that was not picked since, when
/// its priority changes: [`update`](Self::update) finds it.
pub struct ThreadSet {
    threads: [AtomicU32; CAPACITY],
    priorities: [AtomicI32; CAPACITY],
    sequences: [AtomicU64; CAPACITY],
    /// `free[..free_len]` are the free slots; the last one is used next.
    free: [AtomicU32; CAPACITY],
    free_len: AtomicU32,
    /// One past the highest slot ever used: scans stop there (free slots are reused lowest
    /// first, so it stays near the most threads ever runnable at once).
    end: AtomicU32,
    /// The next sequence number at the back (counts up) and at the front (counts down).
    back: AtomicU64,
    front: AtomicU64,
}

impl Default for ThreadSet {
    fn default() -> Self {
        Self::new()
    }
}

impl ThreadSet {
    /// An empty set, usable as a `static`.
    pub const fn new() -> ThreadSet {
        let mut free = [const { AtomicU32::new(0) }; CAPACITY];
        let mut i = 0;
        while i < CAPACITY {
            // Slot 0 on top: the first insertions fill the slots in order.
            free[i] = AtomicU32::new((CAPACITY - 1 - i) as u32);
            i += 1;
        }
        ThreadSet {
            threads: [const { AtomicU32::new(0) }; CAPACITY],
            priorities: [const { AtomicI32::new(0) }; CAPACITY],
            sequences: [const { AtomicU64::new(0) }; CAPACITY],
            free,
            free_len: AtomicU32::new(CAPACITY as u32),
            end: AtomicU32::new(0),
            back: AtomicU64::new(MIDDLE),
            front: AtomicU64::new(MIDDLE - 1),
        }
    }

    /// Adds `thread` behind every thread in the set. Returns `false`, holding nothing, when the
    /// set is full or `thread` is 0 (which means "no thread" in the scheduler ABI).
    ///
    /// Straight-line code: fit for a bounded `preempted`.
    pub fn push_back(&self, thread: u32, priority: i32) -> bool {
        self.insert(thread, priority, &self.back, 1)
    }

    /// Adds `thread` before every thread in the set (a thread that must resume first). Returns
    /// `false` as [`push_back`](Self::push_back) does.
    pub fn push_front(&self, thread: u32, priority: i32) -> bool {
        // Adding u64::MAX, wrapping, steps the front counter down by one.
        self.insert(thread, priority, &self.front, u64::MAX)
    }

    /// Stores the entry in a free slot, in line at `counter`, and steps `counter` by `step`
    /// (wrapping) if it did.
    fn insert(&self, thread: u32, priority: i32, counter: &AtomicU64, step: u64) -> bool {
        let free_len = self.free_len.load(Relaxed);
        if thread == 0 || free_len == 0 {
            return false;
        }
        let free_len = free_len.wrapping_sub(1);
        let slot = self.free[free_len as usize & MASK].load(Relaxed) as usize & MASK;
        self.free_len.store(free_len, Relaxed);
        let sequence = counter.load(Relaxed);
        self.threads[slot].store(thread, Relaxed);
        self.priorities[slot].store(priority, Relaxed);
        self.sequences[slot].store(sequence, Relaxed);
        self.end.store(self.end.load(Relaxed).max(slot as u32 + 1), Relaxed);
        counter.store(sequence.wrapping_add(step), Relaxed);
        true
    }

    /// Gives `thread`, if the set holds it, the priority `priority` (keeping its place in line);
    /// returns whether it was there.
    pub fn update(&self, thread: u32, priority: i32) -> bool {
        let found = self.slots().find(|&slot| thread != 0 && self.threads[slot].load(Relaxed) == thread);
        if let Some(slot) = found {
            self.priorities[slot].store(priority, Relaxed);
        }
        found.is_some()
    }

    /// Removes and returns the entry with the least `key`, or `None` when the set is empty.
    /// Among equal keys the lowest slot wins, which is not arrival order: make the sequence
    /// part of the key where arrival order matters.
    pub fn pick_by<K: Ord>(&self, key: impl Fn(&Entry) -> K) -> Option<Entry> {
        let mut best: Option<(usize, Entry, K)> = None;
        for slot in self.slots() {
            let Some(entry) = self.entry(slot) else { continue };
            let candidate = key(&entry);
            if best.as_ref().is_none_or(|(_, _, least)| candidate < *least) {
                best = Some((slot, entry, candidate));
            }
        }
        let (slot, entry, _) = best?;
        self.threads[slot & MASK].store(0, Relaxed);
        let free_len = self.free_len.load(Relaxed);
        self.free[free_len as usize & MASK].store(slot as u32, Relaxed);
        self.free_len.store(free_len.wrapping_add(1), Relaxed);
        Some(entry)
    }

    /// Whether some entry satisfies `predicate`.
    pub fn any(&self, predicate: impl Fn(&Entry) -> bool) -> bool {
        self.slots().filter_map(|slot| self.entry(slot)).any(|entry| predicate(&entry))
    }

    /// Whether the set holds no thread.
    pub fn is_empty(&self) -> bool {
        self.free_len.load(Relaxed) as usize == CAPACITY
    }

    /// The slots that may be in use.
    fn slots(&self) -> core::ops::Range<usize> {
        0..(self.end.load(Relaxed) as usize).min(CAPACITY)
    }

    /// The entry in `slot`, if the slot is in use.
    fn entry(&self, slot: usize) -> Option<Entry> {
        let slot = slot & MASK;
        let thread = self.threads[slot].load(Relaxed);
        (thread != 0).then(|| Entry {
            thread,
            priority: self.priorities[slot].load(Relaxed),
            sequence: self.sequences[slot].load(Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use core::cmp::Reverse;
    use std::vec::Vec;

    fn drain<K: Ord>(set: &ThreadSet, key: impl Fn(&Entry) -> K + Copy) -> Vec<u32> {
        core::iter::from_fn(|| set.pick_by(key)).map(|entry| entry.thread).collect()
    }

    #[test]
    fn arrival_order_with_the_front_first() {
        let set = ThreadSet::new();
        assert!(set.push_back(10, 0));
        assert!(set.push_back(11, 0));
        assert!(set.push_front(12, 0));
        assert!(set.push_back(13, 0));
        assert!(set.push_front(14, 0));
        assert_eq!(drain(&set, |e| e.sequence), [14, 12, 10, 11, 13]);
        assert_eq!(set.pick_by(|e| e.sequence), None);
    }

    #[test]
    fn priority_then_arrival() {
        let set = ThreadSet::new();
        for (thread, priority) in [(1, 0), (2, 5), (3, -1), (4, 5), (5, 0)] {
            assert!(set.push_back(thread, priority));
        }
        assert_eq!(drain(&set, |e| (Reverse(e.priority), e.sequence)), [2, 4, 1, 5, 3]);
    }

    #[test]
    fn picking_removes_and_frees_the_slot() {
        let set = ThreadSet::new();
        assert!(set.push_back(7, 3));
        assert_eq!(set.pick_by(|e| e.sequence), Some(Entry { thread: 7, priority: 3, sequence: MIDDLE }));
        assert!(!set.any(|_| true));
        // Slots are reused in any order without losing or duplicating entries.
        for round in 0..4u32 {
            for thread in 1..=CAPACITY as u32 {
                assert!(set.push_back(thread + round * 1000, 0));
            }
            let picked = drain(&set, |e| e.sequence);
            assert_eq!(picked, (1..=CAPACITY as u32).map(|t| t + round * 1000).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_full_set_drops_the_newcomer() {
        let set = ThreadSet::new();
        for thread in 1..=CAPACITY as u32 {
            assert!(set.push_back(thread, 0));
        }
        assert!(!set.push_back(9999, 0));
        assert!(!set.push_front(9998, 0));
        assert!(!set.any(|e| e.thread >= 9998));
        assert_eq!(set.pick_by(|e| e.sequence).map(|e| e.thread), Some(1));
        assert!(set.push_front(9999, 0));
        assert_eq!(set.pick_by(|e| e.sequence).map(|e| e.thread), Some(9999));
        assert_eq!(drain(&set, |e| e.sequence).len(), CAPACITY - 1);
    }

    #[test]
    fn an_update_changes_the_priority_in_place() {
        let set = ThreadSet::new();
        assert!(set.push_back(1, 0));
        assert!(set.push_back(2, 0));
        assert!(set.update(1, 7));
        assert!(!set.update(3, 7));
        assert_eq!(set.pick_by(|e| e.sequence), Some(Entry { thread: 1, priority: 7, sequence: MIDDLE }));
    }

    #[test]
    fn thread_zero_is_refused_and_any_sees_entries() {
        let set = ThreadSet::new();
        assert!(!set.push_back(0, 0));
        assert!(set.push_back(3, 2));
        assert!(set.any(|e| e.priority > 1));
        assert!(!set.any(|e| e.priority > 2));
    }
}
