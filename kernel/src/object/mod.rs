//! Kernel objects: what a handle can name below the level of domains, and the bookkeeping they
//! need. Nothing here knows of domains, threads or portals.
//!
//! * [`quota`]: a domain's memory quota;
//! * [`guest_memory`]: component heaps and the bounds-checked copies into and out of them, the
//!   kernel's `unsafe` memory accesses;
//! * [`memory`]: memory objects (JX's Memory, ReadOnlyMemory, DeviceMemory);
//! * [`atomic`]: the AtomicVariable;
//! * [`interrupt`]: interrupt sources and periodic timers;
//! * [`disk`]: emulated disks;
//! * [`nic`]: emulated network cards, [`tap`], their Linux TAP backend (`unsafe` code besides
//!   `guest_memory` and `fuse`), and [`stream`], their stream-socket backend (QEMU's stream
//!   protocol, which `passt` speaks);
//! * [`fuse`]: `/dev/fuse` mounted as an emulated device (`mount`, `umount2` and `poll` are its
//!   `unsafe` code);
//! * [`handle`]: handle tables, generic over what they hold.

use std::time::{Duration, Instant};

pub mod atomic;
pub mod disk;
pub mod fuse;
pub mod guest_memory;
pub mod handle;
pub mod interrupt;
pub mod memory;
pub mod nic;
pub mod quota;
pub mod stream;
pub mod tap;

/// How long an idle kernel CPU keeps looking for a thread to run before it parks: waking a
/// parked OS thread costs this machine tens of microseconds, more than a request takes inside
/// Domos (docs/BENCHMARKS.md, "Idle kernel CPUs that give way").
pub(crate) const CPU_LOOK: Duration = Duration::from_micros(50);

/// How long a device's OS thread — a TAP card's, a FUSE connection's receiver, a disk's I/O
/// thread — keeps looking for its next work after the last before it sleeps: longer than a
/// CPU, since under load its next frame or request is seldom more than a request's time away
/// and each wake of it costs its waker too (docs/BENCHMARKS.md, "A TAP card that looks before
/// it sleeps" and "Device threads that look for 200 µs").
pub(crate) const DEVICE_LOOK: Duration = Duration::from_micros(200);

/// When a kernel OS thread last had work: whether it looks again or sleeps.
pub(crate) struct BusyPoll {
    last: Instant,
    window: Duration,
}

impl BusyPoll {
    /// Looking for `window` after each piece of work.
    pub(crate) fn new(window: Duration) -> Self {
        BusyPoll { last: Instant::now(), window }
    }

    /// Notes work done now.
    pub(crate) fn worked(&mut self) {
        self.last = Instant::now();
    }

    /// Whether to look again instead of sleeping: within the window of the last work, after
    /// giving the core way to any other thread that wants it (`sched_yield`, which returns at
    /// once when none does), as an idle kernel CPU does.
    pub(crate) fn look_again(&self) -> bool {
        let again = self.last.elapsed() < self.window;
        if again {
            std::thread::yield_now();
        }
        again
    }
}
