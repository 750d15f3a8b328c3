//! The loader of Domos: everything the kernel decides from untrusted bytes before anything runs.
//!
//! Every function here is a pure function of its input — a wasm module, a manifest, a
//! configuration file — with no wasmtime and no kernel state, so that it can be unit-tested and
//! fuzzed alone. The kernel (`domos-kernel`) translates and runs only what this crate accepted:
//!
//! * [`manifest`]: the `domos:manifest` section (name, version, interfaces, bounded exports);
//! * [`verifier`]: imports (the host-call table of `domos-abi`, with types), no `memory.grow`,
//!   entry points, and what kind of component a module is;
//! * [`bounded`]: the instruction bound of interrupt handlers and scheduler callbacks;
//! * [`instrument`]: the rewrites before translation: a shadow-stack overflow traps, and long
//!   copies avoid this machine's slow case of `rep movsb`;
//! * [`component`]: a verified component with both builds, and the registry of them;
//! * [`config`], [`nic`], [`codegen`], [`scheduler`]: system configurations, how code is generated, and
//!   the schedulers a configuration names;
//! * [`boot_order`]: the order in which a configuration's domains boot.
#![forbid(unsafe_code)]

pub mod boot_order;
pub mod bounded;
pub mod codegen;
pub mod component;
pub mod config;
pub mod fuse;
pub mod instrument;
pub mod manifest;
pub mod nic;
pub mod scheduler;
pub mod verifier;

pub use boot_order::{boot_order, published_names};
pub use component::{Component, ComponentRegistry};
pub use config::SystemConfig;

/// For the parsers' fuzz tests: a copy of `base` with between 1 and `most` bytes replaced, at
/// places and by values (`value(random)`) drawn from the xorshift state `seed`.
#[cfg(test)]
pub(crate) fn mutated(base: &[u8], seed: &mut u64, most: u64, value: impl Fn(u64) -> u8) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for _ in 0..(*seed % most + 1) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let at = (*seed as usize) % bytes.len();
        bytes[at] = value(*seed);
    }
    bytes
}
