//! Memory quotas: how many bytes a domain may hold, and how many it holds.
//!
//! Every byte a guest causes the kernel to allocate for it — heap pages, thread stacks and
//! message buffers, memory objects, the limits of its child domains — is charged to its domain's
//! quota before it is allocated and given back when it is freed. A quota can be raised (a
//! parent's grant after a memory fault), never lowered below what is charged.

use std::sync::atomic::{AtomicU64, Ordering};

use domos_abi::HostError;

/// How a charge reaches a quota: directly, or through a memory fault that may ask the domain's
/// parent for more (`portal::charge`).
pub(crate) type Charge<'a> = &'a dyn Fn(u64) -> Result<(), HostError>;

/// One domain's memory quota.
#[derive(Debug)]
pub struct Quota {
    used: AtomicU64,
    limit: AtomicU64,
    /// Whether the quota is enforced; without it memory is neither counted nor limited.
    accounting: bool,
}

impl Quota {
    /// A quota of `limit` bytes, counted and enforced only with `accounting`.
    pub fn new(limit: u64, accounting: bool) -> Quota {
        Quota { used: AtomicU64::new(0), limit: AtomicU64::new(limit), accounting }
    }

    /// Bytes charged.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The limit in force.
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Charges `bytes`.
    ///
    /// # Errors
    /// `QuotaExceeded` when the limit does not allow it; nothing is charged then.
    pub fn charge(&self, bytes: u64) -> Result<(), HostError> {
        if !self.accounting {
            return Ok(());
        }
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit())
            })
            .map(|_| ())
            .map_err(|_| HostError::QuotaExceeded)
    }

    /// Gives back `bytes` charged before.
    pub fn uncharge(&self, bytes: u64) {
        if self.accounting {
            self.used.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// Raises the limit by `bytes`.
    pub fn raise_limit(&self, bytes: u64) {
        self.limit.fetch_add(bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stop_at_the_limit_and_raising_it_lets_more_in() {
        let quota = Quota::new(100, true);
        assert_eq!(quota.charge(60), Ok(()));
        assert_eq!(quota.charge(41), Err(HostError::QuotaExceeded));
        assert_eq!(quota.used(), 60, "a refused charge charges nothing");
        assert_eq!(quota.charge(u64::MAX), Err(HostError::QuotaExceeded), "no overflow");
        quota.raise_limit(1);
        assert_eq!(quota.charge(41), Ok(()));
        quota.uncharge(101);
        assert_eq!((quota.used(), quota.limit()), (0, 101));
    }

    #[test]
    fn without_accounting_nothing_is_counted() {
        let quota = Quota::new(1, false);
        assert_eq!(quota.charge(1 << 40), Ok(()));
        quota.uncharge(5);
        assert_eq!(quota.used(), 0);
    }
}
