//! [`RecentPriorities`]: the priorities of the threads a local scheduler picked last.

use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::Relaxed};

/// How many threads [`RecentPriorities`] remembers: more than the CPUs that can run threads of
/// one domain at once, so every running thread is remembered.
const REMEMBERED: usize = 64;

/// The priorities of the [`REMEMBERED`] threads picked most recently.
///
/// A local scheduler is asked about the *running* thread (before a portal call) by id alone;
/// the running thread is one it picked, and it recorded the thread's priority then.
pub struct RecentPriorities {
    threads: [AtomicU32; REMEMBERED],
    priorities: [AtomicI32; REMEMBERED],
    /// When each entry was last recorded (0: never); the oldest is replaced.
    stamps: [AtomicU64; REMEMBERED],
    clock: AtomicU64,
}

impl Default for RecentPriorities {
    fn default() -> Self {
        Self::new()
    }
}

impl RecentPriorities {
    /// An empty table, usable as a `static`.
    pub const fn new() -> RecentPriorities {
        RecentPriorities {
            threads: [const { AtomicU32::new(0) }; REMEMBERED],
            priorities: [const { AtomicI32::new(0) }; REMEMBERED],
            stamps: [const { AtomicU64::new(0) }; REMEMBERED],
            clock: AtomicU64::new(0),
        }
    }

    /// Records that `thread` was picked with `priority`, replacing its earlier entry or else the
    /// least recently recorded one.
    pub fn record(&self, thread: u32, priority: i32) {
        let mut slot = 0;
        for i in 0..REMEMBERED {
            if self.threads[i].load(Relaxed) == thread {
                slot = i;
                break;
            }
            if self.stamps[i].load(Relaxed) < self.stamps[slot].load(Relaxed) {
                slot = i;
            }
        }
        let stamp = self.clock.load(Relaxed).wrapping_add(1);
        self.clock.store(stamp, Relaxed);
        self.threads[slot].store(thread, Relaxed);
        self.priorities[slot].store(priority, Relaxed);
        self.stamps[slot].store(stamp, Relaxed);
    }

    /// The priority `thread` was last picked with, if it is among the remembered ones.
    pub fn get(&self, thread: u32) -> Option<i32> {
        (0..REMEMBERED)
            .find(|&i| thread != 0 && self.threads[i].load(Relaxed) == thread)
            .map(|i| self.priorities[i].load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_latest_priority() {
        let recent = RecentPriorities::new();
        assert_eq!(recent.get(5), None);
        recent.record(5, 3);
        recent.record(6, -2);
        assert_eq!(recent.get(5), Some(3));
        assert_eq!(recent.get(6), Some(-2));
        recent.record(5, 7);
        assert_eq!(recent.get(5), Some(7));
        assert_eq!(recent.get(0), None, "0 is no thread, though free entries hold 0");
    }

    #[test]
    fn forgets_the_least_recently_recorded() {
        let recent = RecentPriorities::new();
        for thread in 1..=REMEMBERED as u32 {
            recent.record(thread, thread as i32);
        }
        // Refreshing thread 1 makes thread 2 the oldest.
        recent.record(1, 100);
        recent.record(1000, 1);
        assert_eq!(recent.get(1), Some(100));
        assert_eq!(recent.get(2), None);
        assert_eq!(recent.get(3), Some(3));
        assert_eq!(recent.get(1000), Some(1));
    }
}
