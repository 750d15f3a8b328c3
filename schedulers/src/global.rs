//! The global scheduling policies of the shipped scheduler components, which pick the domain
//! that runs next.
//!
//! Each is a `static`-friendly value whose methods are the global scheduler ABI
//! (`domos_sdk::global_scheduler!`): `runnable` and `idle` track the domains with runnable
//! threads, `pick` returns one of them (0 when none is runnable) and leaves it runnable, and
//! `ran` accounts for the time a domain's thread ran. A domain that does not fit (more than
//! [`CAPACITY`](crate::CAPACITY) runnable) is dropped; see the crate documentation.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::{DomainSet, Previous};

/// A domain with one ticket that runs one nanosecond advances its pass by 2^`STRIDE_SHIFT`
/// (Waldspurger's `stride1`), so shares of many tickets keep a fine resolution.
const STRIDE_SHIFT: u32 = 20;

/// Passes are brought back down (by the virtual time) when the virtual time passes this, long
/// before they could overflow.
const RENORMALISE_AT: u64 = 1 << 62;

/// Stride scheduling (Waldspurger and Weihl; the proportional share of GVM): each domain has a
/// pass that grows by `ns · 2^20 / tickets` as it runs, and the runnable domain with the least
/// pass runs next, so domains get CPU time in proportion to their tickets.
///
/// The global virtual time is the largest pass picked so far. A domain that becomes runnable
/// joins at the virtual time, so it cannot bank CPU time while idle; an idle domain is
/// remembered with its pass (until its slot is needed), and a pass above the virtual time is
/// kept, so a domain cannot shed the debt of a long run by going idle either.
pub struct Stride {
    domains: DomainSet,
    virtual_time: AtomicU64,
}

impl Default for Stride {
    fn default() -> Self {
        Self::new()
    }
}

impl Stride {
    /// A scheduler with no runnable domain, usable as a `static`.
    pub const fn new() -> Stride {
        Stride { domains: DomainSet::new(), virtual_time: AtomicU64::new(0) }
    }

    /// `domain` has runnable threads and `tickets` as its share.
    pub fn runnable(&self, domain: u32, tickets: u32) {
        let virtual_time = self.virtual_time.load(Relaxed);
        self.domains.set_runnable(domain, tickets, |previous| match previous {
            Previous::Runnable(pass) => pass,
            Previous::Idle(pass) => pass.max(virtual_time),
            Previous::Unknown => virtual_time,
        });
    }

    /// `domain` has no runnable thread any more.
    pub fn idle(&self, domain: u32) {
        self.domains.set_idle(domain);
    }

    /// The runnable domain with the least pass (0 when none is runnable); the virtual time
    /// advances to its pass.
    pub fn pick(&self, _cpu: u32) -> u32 {
        let Some(picked) = self.domains.pick(|domain| domain.key) else { return 0 };
        let virtual_time = self.virtual_time.load(Relaxed).max(picked.key);
        if virtual_time >= RENORMALISE_AT {
            // Every runnable pass is at least the virtual time; idle ones below it rejoin at
            // the virtual time anyway, so shifting all down by it changes no decision.
            self.domains.shift_keys_down(virtual_time);
            self.virtual_time.store(0, Relaxed);
        } else {
            self.virtual_time.store(virtual_time, Relaxed);
        }
        picked.domain
    }

    /// A thread of `domain` ran `ns` nanoseconds: its pass grows by `ns · 2^20 / tickets`
    /// (0 tickets count as 1).
    pub fn ran(&self, domain: u32, ns: u64) {
        self.domains.update_key(domain, |known| {
            let stride = (ns.saturating_mul(1 << STRIDE_SHIFT)) / u64::from(known.tickets.max(1));
            known.key.saturating_add(stride)
        });
    }
}

/// Round-robin over domains: the runnable domain that has waited longest since it was last
/// picked, or since it became runnable, runs next. Tickets are ignored.
pub struct RoundRobin {
    /// Each domain's key is the stamp of when it was last picked or became runnable.
    domains: DomainSet,
    clock: AtomicU64,
}

impl Default for RoundRobin {
    fn default() -> Self {
        Self::new()
    }
}

impl RoundRobin {
    /// A scheduler with no runnable domain, usable as a `static`.
    pub const fn new() -> RoundRobin {
        RoundRobin { domains: DomainSet::new(), clock: AtomicU64::new(0) }
    }

    /// `domain` has runnable threads: it joins at the back, unless it was runnable already.
    pub fn runnable(&self, domain: u32, tickets: u32) {
        self.domains.set_runnable(domain, tickets, |previous| match previous {
            Previous::Runnable(stamp) => stamp,
            Previous::Idle(_) | Previous::Unknown => self.stamp(),
        });
    }

    /// `domain` has no runnable thread any more.
    pub fn idle(&self, domain: u32) {
        self.domains.set_idle(domain);
    }

    /// The runnable domain that waited longest (0 when none is runnable); it goes to the back.
    pub fn pick(&self, _cpu: u32) -> u32 {
        self.domains.pick(|_| self.stamp()).map_or(0, |picked| picked.domain)
    }

    /// A thread of `domain` ran: round-robin keeps no account of time.
    pub fn ran(&self, _domain: u32, _ns: u64) {}

    /// The next stamp: later than every earlier one.
    fn stamp(&self) -> u64 {
        let stamp = self.clock.load(Relaxed).wrapping_add(1);
        self.clock.store(stamp, Relaxed);
        stamp
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    const MS: u64 = 1_000_000;

    /// Picks `rounds` times, each pick running a millisecond; the picks of each of `domains`.
    fn run(policy: &Stride, domains: &[u32], rounds: usize) -> Vec<usize> {
        let mut picks = std::vec![0; domains.len()];
        for _ in 0..rounds {
            let domain = policy.pick(0);
            policy.ran(domain, MS);
            if let Some(i) = domains.iter().position(|&d| d == domain) {
                picks[i] += 1;
            }
        }
        picks
    }

    #[test]
    fn stride_shares_in_proportion_to_tickets() {
        let policy = Stride::new();
        assert_eq!(policy.pick(0), 0);
        policy.runnable(1, 100);
        policy.runnable(2, 300);
        policy.runnable(3, 0);
        let picks = run(&policy, &[1, 2, 3], 802);
        // 0 tickets count as 1: each millisecond of domain 3 costs as much pass as 100 of
        // domain 1, so it runs at the start and once more after 100 of domain 1.
        assert_eq!(picks, [200, 600, 2]);
    }

    #[test]
    fn stride_does_not_let_an_idle_domain_bank_time() {
        let policy = Stride::new();
        policy.runnable(1, 1);
        policy.runnable(2, 1);
        assert_eq!(run(&policy, &[1, 2], 10), [5, 5]);
        policy.idle(2);
        assert_eq!(run(&policy, &[1, 2], 100), [100, 0]);
        // Back after 100 ms idle: it shares equally from now on, no burst of 100 ms.
        policy.runnable(2, 1);
        assert_eq!(run(&policy, &[1, 2], 10), [5, 5]);
        // A new domain joins at the virtual time as well.
        policy.runnable(3, 1);
        assert_eq!(run(&policy, &[1, 2, 3], 30), [10, 10, 10]);
    }

    #[test]
    fn stride_keeps_the_debt_of_a_domain_that_went_idle() {
        let policy = Stride::new();
        policy.runnable(1, 1);
        policy.runnable(2, 1);
        assert_eq!(policy.pick(0), 1);
        // Domain 1 ran 10 ms in one go, then blocked; it comes back at once.
        policy.ran(1, 10 * MS);
        policy.idle(1);
        policy.runnable(1, 1);
        assert_eq!(run(&policy, &[1, 2], 10), [0, 10], "domain 2 catches up first");
    }

    #[test]
    fn stride_renormalises_before_passes_overflow() {
        let policy = Stride::new();
        policy.runnable(1, 1);
        policy.runnable(2, 1);
        // Runs of about 36 minutes on one ticket, 2^61 of pass each: the fifth pick takes a
        // pass of 2^62, and all passes are shifted down by it.
        for _ in 0..5 {
            let domain = policy.pick(0);
            policy.ran(domain, 1 << 41);
        }
        assert_eq!(policy.virtual_time.load(Relaxed), 0);
        // The order survives: domain 1 has just run 36 minutes more than domain 2.
        assert_eq!(run(&policy, &[1, 2], 10), [0, 10]);
    }

    #[test]
    fn global_round_robin_picks_the_longest_waiting() {
        let policy = RoundRobin::new();
        assert_eq!(policy.pick(0), 0);
        for domain in [3, 1, 2] {
            policy.runnable(domain, 1);
        }
        assert_eq!([policy.pick(0), policy.pick(0), policy.pick(0), policy.pick(0)], [3, 1, 2, 3]);
        // Runnable again while runnable: keeps its place.
        policy.runnable(1, 5);
        policy.ran(1, MS);
        policy.idle(2);
        assert_eq!([policy.pick(0), policy.pick(0), policy.pick(0)], [1, 3, 1]);
        // Back from idle: at the back.
        policy.runnable(2, 1);
        assert_eq!([policy.pick(0), policy.pick(0), policy.pick(0)], [3, 1, 2]);
    }
}
