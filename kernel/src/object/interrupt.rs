//! Interrupts: kernel event sources (the timer, the completions of emulated disks, frames
//! arriving at emulated network cards, FUSE requests) whose events a driver handles in a
//! dedicated thread of its own domain. The handler is the component's
//! `domos_interrupt(source, events)` export, which its manifest must list as `bounded` — the
//! verifier has proved it finishes within a known number of instructions — and which typically
//! wakes a driver thread through an atomic variable.
//!
//! A source can instead notify an atomic variable itself (`EventSource::notifying`), as seL4
//! delivers an interrupt to a notification object: each event sets the variable and wakes one of
//! its waiters, with no handler thread to switch to — what such a handler would have done.
//!
//! Events are counted, not queued: a handler that runs late is told how many events it missed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::atomic::AtomicVariable;

/// A kernel event source with at most one handler thread waiting on it, or an atomic variable
/// it notifies.
#[derive(Default)]
pub struct EventSource {
    pending: AtomicU64,
    closed: AtomicBool,
    waiter: Mutex<Option<Waker>>,
    /// The variable each event sets, and to what, in place of a handler thread.
    notifies: Option<(Arc<AtomicVariable>, u32)>,
}

impl EventSource {
    /// A source whose every event, until it is closed, sets `variable` to `value` and wakes one
    /// thread blocked on it.
    pub fn notifying(variable: Arc<AtomicVariable>, value: u32) -> EventSource {
        EventSource { notifies: Some((variable, value)), ..EventSource::default() }
    }

    /// Records one event and wakes the handler thread, or notifies the source's variable.
    pub fn signal(&self) {
        if let Some((variable, value)) = &self.notifies {
            if !self.closed.load(Ordering::Acquire) {
                variable.set_and_unblock(*value, 1);
            }
            return;
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.wake();
    }

    /// Whether this is a notifying source that was closed: nothing refers to it by its number
    /// any more (it has no handler thread), so its number may be given to a new one.
    pub fn spent_notification(&self) -> bool {
        self.notifies.is_some() && self.closed.load(Ordering::Acquire)
    }

    /// Ends the source: its handler thread ends after the events already signalled.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake();
    }

    fn wake(&self) {
        if let Some(waker) = crate::lock(&self.waiter).take() {
            waker.wake();
        }
    }

    /// The events signalled since the last call (at least one), or `None` once closed.
    pub fn poll_events(&self, cx: &Context<'_>) -> Poll<Option<u64>> {
        let take = || match self.pending.swap(0, Ordering::AcqRel) {
            0 if self.closed.load(Ordering::Acquire) => Poll::Ready(None),
            0 => Poll::Pending,
            n => Poll::Ready(Some(n)),
        };
        if let Poll::Ready(events) = take() {
            return Poll::Ready(events);
        }
        *crate::lock(&self.waiter) = Some(cx.waker().clone());
        // A signal between the first look and registering the waker found no waker to wake.
        take()
    }
}

struct Timer {
    source: Weak<EventSource>,
    period: Duration,
    next: Instant,
}

/// The periodic timers, driven by the kernel's tick (1 ms resolution).
#[derive(Default)]
pub struct Timers {
    timers: Mutex<Vec<Timer>>,
}

impl Timers {
    /// Signals `source` every `period`, until it is dropped or closed.
    pub fn add(&self, source: &Arc<EventSource>, period: Duration) {
        let timer = Timer { source: Arc::downgrade(source), period, next: Instant::now() + period };
        crate::lock(&self.timers).push(timer);
    }

    /// Signals the timers due at `now`; forgets those whose source is gone or closed. A timer
    /// that fell behind fires once and resumes from `now`, so missed ticks do not pile up.
    pub fn fire(&self, now: Instant) {
        crate::lock(&self.timers).retain_mut(|timer| {
            let Some(source) = timer.source.upgrade().filter(|s| !s.closed.load(Ordering::Acquire)) else {
                return false;
            };
            if timer.next <= now {
                source.signal();
                timer.next += timer.period;
                if timer.next <= now {
                    timer.next = now + timer.period;
                }
            }
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn events_are_counted_and_wake_the_handler_until_closed() {
        let source = Arc::new(EventSource::default());
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let cx = Context::from_waker(&waker);
        assert_eq!(source.poll_events(&cx), Poll::Pending);
        source.signal();
        source.signal();
        assert!(flag.0.load(Ordering::SeqCst), "the waiting handler was woken");
        assert_eq!(source.poll_events(&cx), Poll::Ready(Some(2)), "two events, one run of the handler");
        source.close();
        assert_eq!(source.poll_events(&cx), Poll::Ready(None));
    }

    #[test]
    fn a_notifying_source_sets_its_variable_until_closed() {
        let variable = Arc::new(AtomicVariable::new(0));
        let source = EventSource::notifying(variable.clone(), 7);
        source.signal();
        assert_eq!(variable.get(), 7, "the event set the variable");
        assert_eq!(source.pending.load(Ordering::SeqCst), 0, "nothing is left for a handler thread");
        variable.set(0);
        source.close();
        source.signal();
        assert_eq!(variable.get(), 0, "a closed source notifies no more");
    }

    #[test]
    fn timers_fire_on_time_catch_up_once_and_drop_closed_sources() {
        let timers = Timers::default();
        let source = Arc::new(EventSource::default());
        timers.add(&source, Duration::from_millis(5));
        let start = Instant::now();
        timers.fire(start);
        assert_eq!(source.pending.load(Ordering::SeqCst), 0, "not due yet");
        timers.fire(start + Duration::from_millis(60));
        assert_eq!(source.pending.load(Ordering::SeqCst), 1, "late by eleven periods: fires once");
        timers.fire(start + Duration::from_millis(62));
        assert_eq!(source.pending.load(Ordering::SeqCst), 1, "resumes a period after the late tick");
        source.close();
        timers.fire(start + Duration::from_millis(100));
        assert!(crate::lock(&timers.timers).is_empty(), "a closed source's timer is forgotten");
    }
}
