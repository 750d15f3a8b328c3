//! Link shares: a tree of classes, each a `Network` portal's, and a pacer that admits bytes to a
//! link of a given rate from the classes with data waiting, by their weights (hierarchical
//! packet fair queuing: H-PFQ, Bennett and Zhang 1996, as GVM uses it, Back et al. §3.3).
//!
//! A class's *share* of the link while some classes wait is what hierarchical generalized
//! processor sharing gives it: at every level, the parent's share split among the children with
//! data waiting in their subtree, by weight. A class's own sockets count as one more child of
//! weight 1 of it, so the root's sockets (the `Network` portal itself) compete with the
//! configured classes instead of bypassing them. The shares are recomputed at every admission
//! from the classes waiting then, and a flat start-time fair queue over the classes served by
//! those shares (Goyal et al. 1996: a class's tag is its last finish, or the virtual time when
//! it was idle) decides who is next — the tree only sets the weights, so no per-level queues are
//! kept. The pacer lets the link run at most `BURST_NS` ahead of the clock.

use alloc::vec::Vec;

/// Classes a stack keeps at most (they live as long as the stack: a portal's class is an index).
pub const MAX_CLASSES: usize = 64;
/// The largest weight of a class.
pub const MAX_WEIGHT: u32 = 1000;
/// How far ahead of the clock the link may be booked: two of the stack's timer ticks, so that
/// the link does not idle while the waiting senders are woken.
const BURST_NS: u64 = 4_000_000;

/// How long a class whose stream sender stopped waiting still counts as having data waiting: a
/// stream sender is between two of its calls (or two of its admissions) for microseconds, and
/// its turns must not go to the others meanwhile, as they would to a class gone idle.
const STREAM_LINGER_NS: u64 = 1_000_000;

/// The root class: the stack's `Network` portal.
pub const ROOT: usize = 0;

struct Class {
    parent: usize,
    weight: u32,
    /// Senders waiting in this class now (its own sockets, not its children's).
    waiting: u32,
    /// Bytes of datagrams queued in this class, waiting for their turn.
    queued: usize,
    /// Until when the class counts as waiting after its last stream sender stopped (kernel-clock
    /// nanoseconds; `STREAM_LINGER_NS`).
    lingers_until: u64,
    /// Start-time fair queuing's finish tag of the last bytes admitted, in virtual bytes.
    finish: f64,
}

/// The classes and the link's pacer.
pub struct Shares {
    classes: Vec<Class>,
    /// The link's rate in bytes per second; 0: not paced, everything is admitted at once.
    rate: u64,
    /// When the bytes admitted so far have left the link at `rate`, in kernel-clock nanoseconds.
    busy_until: u64,
    /// Start-time fair queuing's virtual time: the tag of the last class served.
    virtual_time: f64,
}

impl Shares {
    /// A link of `rate` bytes per second (0: unpaced) with only the root class.
    pub fn new(rate: u64) -> Shares {
        let root = Class { parent: ROOT, weight: 1, waiting: 0, queued: 0, lingers_until: 0, finish: 0.0 };
        Shares { classes: alloc::vec![root], rate, busy_until: 0, virtual_time: 0.0 }
    }

    /// Whether the link is paced at all.
    pub fn paced(&self) -> bool {
        self.rate > 0
    }

    /// A child of `parent` with `weight`; `None` for a weight out of range or a full table.
    pub fn add(&mut self, parent: usize, weight: u32) -> Option<usize> {
        if !(1..=MAX_WEIGHT).contains(&weight) || self.classes.len() >= MAX_CLASSES || parent >= self.classes.len() {
            return None;
        }
        let finish = self.virtual_time;
        self.classes.push(Class { parent, weight, waiting: 0, queued: 0, lingers_until: 0, finish });
        Some(self.classes.len() - 1)
    }

    /// A stream sender of `class` starts (`true`) or stops waiting at `now`.
    pub fn set_waiting(&mut self, class: usize, waiting: bool, now: u64) {
        let c = &mut self.classes[class];
        if waiting {
            c.waiting += 1;
        } else {
            c.waiting = c.waiting.saturating_sub(1);
            c.lingers_until = now + STREAM_LINGER_NS;
        }
    }

    /// Bytes queued in `class` now.
    pub fn queued(&self, class: usize) -> usize {
        self.classes[class].queued
    }

    /// `len` more (`true`) or fewer bytes queued in `class`.
    pub fn set_queued(&mut self, class: usize, len: usize, more: bool) {
        let c = &mut self.classes[class];
        c.queued = if more { c.queued + len } else { c.queued.saturating_sub(len) };
    }

    /// Whether `class`'s own sockets have data waiting at `now`: a stream sender waiting (or
    /// between two of its calls), or datagrams queued.
    fn backlogged(&self, class: usize, now: u64) -> bool {
        let c = &self.classes[class];
        c.waiting > 0 || c.queued > 0 || now < c.lingers_until
    }

    /// Whether `class` or a class below it has data waiting.
    fn active(&self, class: usize, now: u64) -> bool {
        if self.backlogged(class, now) {
            return true;
        }
        (1..self.classes.len()).any(|c| self.classes[c].parent == class && self.active(c, now))
    }

    /// The sum of the weights of `class`'s children with senders waiting, with 1 for its own
    /// sockets when they wait.
    fn active_weight(&self, class: usize, now: u64) -> u64 {
        let own = u64::from(self.backlogged(class, now));
        own + (1..self.classes.len())
            .filter(|&c| self.classes[c].parent == class && self.active(c, now))
            .map(|c| u64::from(self.classes[c].weight))
            .sum::<u64>()
    }

    /// `class`'s own sockets' share of the link now, between 0 and 1 (H-GPS over the waiting).
    fn share(&self, class: usize, now: u64) -> f64 {
        let total = self.active_weight(class, now);
        let mut share = if total == 0 { 1.0 } else { 1.0 / total as f64 };
        let mut node = class;
        while node != ROOT {
            let parent = self.classes[node].parent;
            let total = self.active_weight(parent, now).max(1);
            share *= f64::from(self.classes[node].weight) / total as f64;
            node = parent;
        }
        share
    }

    fn tag(&self, class: usize) -> f64 {
        self.classes[class].finish.max(self.virtual_time)
    }

    /// The class whose bytes go next, among those with data waiting: `Err` with the time to look
    /// again when the link has no room (`None`: no class has data waiting).
    pub fn next(&self, now: u64) -> Result<usize, Option<u64>> {
        let start = self.busy_until.max(now);
        let next = (0..self.classes.len()).filter(|&c| self.backlogged(c, now)).min_by(|&a, &b| {
            self.tag(a).partial_cmp(&self.tag(b)).unwrap_or(core::cmp::Ordering::Equal).then(a.cmp(&b))
        });
        match next {
            None => Err(None),
            Some(_) if start > now + BURST_NS => Err(Some(start - BURST_NS)),
            Some(class) => Ok(class),
        }
    }

    /// Books `len` bytes of `class` (the one [`next`](Self::next) named) on the link.
    pub fn charge(&mut self, class: usize, len: usize, now: u64) {
        if self.rate == 0 {
            return;
        }
        let start = self.busy_until.max(now);
        let tag = self.tag(class);
        let share = self.share(class, now).max(1e-6);
        self.virtual_time = tag;
        self.classes[class].finish = tag + len as f64 / share;
        self.busy_until = start + (len as u64).saturating_mul(1_000_000_000) / self.rate;
    }
}
