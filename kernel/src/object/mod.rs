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
