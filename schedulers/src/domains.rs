//! [`DomainSet`]: the domains a global scheduler knows.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::CAPACITY;

/// A domain as a [`DomainSet`] holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Domain {
    /// The kernel's id of the domain (never 0).
    pub domain: u32,
    /// Its CPU share, as last reported.
    pub tickets: u32,
    /// What the policy orders domains by; [`DomainSet::pick`] takes the least.
    pub key: u64,
}

/// What a [`DomainSet`] knew of a domain that is reported runnable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Previous {
    /// It was runnable already, with this key.
    Runnable(u64),
    /// It was idle and remembered, with the key it had.
    Idle(u64),
    /// It is new, or was idle and forgotten to make room.
    Unknown,
}

/// Up to [`CAPACITY`] domains: the runnable ones, and idle ones it remembers while there is
/// room, so that a policy can carry a domain's key (a stride pass) across an idle period.
///
/// An idle domain is forgotten only to make room for a runnable one, so the set holds up to
/// [`CAPACITY`] runnable domains whatever number went idle.
pub struct DomainSet {
    /// 0 in a free slot.
    domains: [AtomicU32; CAPACITY],
    tickets: [AtomicU32; CAPACITY],
    runnable: [AtomicBool; CAPACITY],
    keys: [AtomicU64; CAPACITY],
    /// Slots in use: domains are never removed, only replaced, so they fill the slots from 0.
    used: AtomicU32,
}

impl Default for DomainSet {
    fn default() -> Self {
        Self::new()
    }
}

impl DomainSet {
    /// An empty set, usable as a `static`.
    pub const fn new() -> DomainSet {
        DomainSet {
            domains: [const { AtomicU32::new(0) }; CAPACITY],
            tickets: [const { AtomicU32::new(0) }; CAPACITY],
            runnable: [const { AtomicBool::new(false) }; CAPACITY],
            keys: [const { AtomicU64::new(0) }; CAPACITY],
            used: AtomicU32::new(0),
        }
    }

    /// Marks `domain` runnable with `tickets`; its key becomes `key(what the set knew of it)`.
    ///
    /// A new domain takes a free slot, or else the slot of the idle domain with the least key.
    /// Returns `false`, changing nothing, when `domain` is 0 or new and all [`CAPACITY`] slots
    /// hold runnable domains.
    pub fn set_runnable(&self, domain: u32, tickets: u32, key: impl FnOnce(Previous) -> u64) -> bool {
        if domain == 0 {
            return false;
        }
        let (slot, previous) = match self.find(domain) {
            Some(slot) => {
                let known = self.keys[slot].load(Relaxed);
                (
                    slot,
                    if self.runnable[slot].load(Relaxed) { Previous::Runnable(known) } else { Previous::Idle(known) },
                )
            }
            None => match self.vacancy() {
                Some(slot) => (slot, Previous::Unknown),
                None => return false,
            },
        };
        self.domains[slot].store(domain, Relaxed);
        self.used.store(self.used.load(Relaxed).max(slot as u32 + 1), Relaxed);
        self.tickets[slot].store(tickets, Relaxed);
        self.keys[slot].store(key(previous), Relaxed);
        self.runnable[slot].store(true, Relaxed);
        true
    }

    /// Marks `domain` idle; the set remembers it (and its key) while there is room.
    pub fn set_idle(&self, domain: u32) {
        if let Some(slot) = self.find(domain) {
            self.runnable[slot].store(false, Relaxed);
        }
    }

    /// Picks the runnable domain with the least key (the earliest slot among equal keys), sets
    /// its key to `next_key(domain)` and returns it as it was before; `None` when no domain is
    /// runnable. The domain stays runnable.
    pub fn pick(&self, next_key: impl FnOnce(&Domain) -> u64) -> Option<Domain> {
        let mut best: Option<(usize, u64)> = None;
        for slot in self.slots() {
            if self.domains[slot].load(Relaxed) == 0 || !self.runnable[slot].load(Relaxed) {
                continue;
            }
            let key = self.keys[slot].load(Relaxed);
            if best.is_none_or(|(_, least)| key < least) {
                best = Some((slot, key));
            }
        }
        let (slot, key) = best?;
        let picked =
            Domain { domain: self.domains[slot].load(Relaxed), tickets: self.tickets[slot].load(Relaxed), key };
        self.keys[slot].store(next_key(&picked), Relaxed);
        Some(picked)
    }

    /// Sets the key of `domain`, runnable or remembered idle, to `new_key(domain)`; returns
    /// whether the set knew it.
    pub fn update_key(&self, domain: u32, new_key: impl FnOnce(&Domain) -> u64) -> bool {
        let Some(slot) = self.find(domain) else { return false };
        let known = Domain { domain, tickets: self.tickets[slot].load(Relaxed), key: self.keys[slot].load(Relaxed) };
        self.keys[slot].store(new_key(&known), Relaxed);
        true
    }

    /// Subtracts `amount` from every key (saturating at 0): lets a policy whose keys only grow
    /// bring them back down before they overflow.
    pub fn shift_keys_down(&self, amount: u64) {
        for key in &self.keys[self.slots()] {
            key.store(key.load(Relaxed).saturating_sub(amount), Relaxed);
        }
    }

    /// The slot holding `domain`, runnable or idle.
    /// The slots in use.
    fn slots(&self) -> core::ops::Range<usize> {
        0..(self.used.load(Relaxed) as usize).min(CAPACITY)
    }

    fn find(&self, domain: u32) -> Option<usize> {
        (domain != 0).then(|| self.slots().find(|&slot| self.domains[slot].load(Relaxed) == domain)).flatten()
    }

    /// A slot for a new domain: a free one, or else that of the idle domain with the least key.
    fn vacancy(&self) -> Option<usize> {
        let used = self.slots().end;
        if used < CAPACITY {
            return Some(used);
        }
        let mut idle: Option<(usize, u64)> = None;
        for slot in 0..CAPACITY {
            let key = self.keys[slot].load(Relaxed);
            if !self.runnable[slot].load(Relaxed) && idle.is_none_or(|(_, least)| key < least) {
                idle = Some((slot, key));
            }
        }
        idle.map(|(slot, _)| slot)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// Keys: `key` for newcomers, the previous one otherwise.
    fn keep_or(key: u64) -> impl FnOnce(Previous) -> u64 {
        move |previous| match previous {
            Previous::Runnable(known) | Previous::Idle(known) => known,
            Previous::Unknown => key,
        }
    }

    #[test]
    fn picks_the_least_key_and_keeps_it_runnable() {
        let set = DomainSet::new();
        assert!(set.set_runnable(1, 10, keep_or(30)));
        assert!(set.set_runnable(2, 20, keep_or(10)));
        assert!(set.set_runnable(3, 30, keep_or(20)));
        let picked: Vec<_> = (0..4).filter_map(|round| set.pick(|d| d.key + 25 + round)).map(|d| d.domain).collect();
        // 2 (10→35), 3 (20→46), 1 (30→57), 2 (35→63).
        assert_eq!(picked, [2, 3, 1, 2]);
        assert_eq!(set.pick(|d| d.key), Some(Domain { domain: 3, tickets: 30, key: 46 }));
    }

    #[test]
    fn idle_domains_are_not_picked_but_remembered() {
        let set = DomainSet::new();
        assert!(set.set_runnable(1, 1, keep_or(5)));
        assert!(set.set_runnable(2, 1, keep_or(7)));
        set.set_idle(1);
        assert_eq!(set.pick(|d| d.key).map(|d| d.domain), Some(2));
        assert!(set.update_key(1, |d| d.key + 1), "an idle domain keeps its key and can be charged");
        let mut seen = None;
        assert!(set.set_runnable(1, 4, |previous| {
            seen = Some(previous);
            9
        }));
        assert_eq!(seen, Some(Previous::Idle(6)));
        assert_eq!(set.pick(|d| d.key), Some(Domain { domain: 2, tickets: 1, key: 7 }));
        set.set_idle(1);
        set.set_idle(2);
        assert_eq!(set.pick(|d| d.key), None);
        assert!(!set.update_key(3, |d| d.key), "an unknown domain");
    }

    #[test]
    fn runnable_again_sees_its_own_key_and_new_tickets() {
        let set = DomainSet::new();
        assert!(set.set_runnable(4, 1, keep_or(3)));
        let mut seen = None;
        assert!(set.set_runnable(4, 8, |previous| {
            seen = Some(previous);
            3
        }));
        assert_eq!(seen, Some(Previous::Runnable(3)));
        assert_eq!(set.pick(|d| d.key), Some(Domain { domain: 4, tickets: 8, key: 3 }));
    }

    #[test]
    fn idle_domains_make_room_and_a_full_set_drops_the_newcomer() {
        let set = DomainSet::new();
        for domain in 1..=CAPACITY as u32 {
            assert!(set.set_runnable(domain, 1, keep_or(u64::from(domain))));
        }
        assert!(!set.set_runnable(5000, 1, keep_or(0)), "all runnable: no room");
        assert!(!set.set_runnable(0, 1, keep_or(0)), "0 is no domain");
        // Idle 9 (key 9) and 8 (key 8): the newcomer takes the place of 8, the least key.
        set.set_idle(9);
        set.set_idle(8);
        let mut seen = None;
        assert!(set.set_runnable(5000, 1, |previous| {
            seen = Some(previous);
            0
        }));
        assert_eq!(seen, Some(Previous::Unknown));
        assert!(!set.update_key(8, |d| d.key), "8 was forgotten");
        assert!(set.update_key(9, |d| d.key), "9 is remembered");
        assert_eq!(set.pick(|d| d.key).map(|d| d.domain), Some(5000));
    }

    #[test]
    fn keys_shift_down_saturating() {
        let set = DomainSet::new();
        assert!(set.set_runnable(1, 1, keep_or(100)));
        assert!(set.set_runnable(2, 1, keep_or(30)));
        set.shift_keys_down(50);
        assert_eq!(set.pick(|d| d.key).map(|d| (d.domain, d.key)), Some((2, 0)));
        set.set_idle(2);
        assert_eq!(set.pick(|d| d.key).map(|d| (d.domain, d.key)), Some((1, 50)));
    }
}
