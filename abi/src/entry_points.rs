//! The functions an ordinary component exports for the kernel to call, declared once.
//!
//! The loader's verifier checks a module's exports against [`ENTRY_POINTS`], and the C header
//! (`render_c_header`) declares them, so a component in any language is held to one list. The
//! Rust SDK's `component!` macro defines them for Rust components. Scheduler components export
//! other functions instead (the verifier's own lists).
//!
//! A module may link several components (the collocated build, decision 0015): it then exports
//! each entry point once per component, as `ENTRY:NAME` ([`component_export`]). Those of the
//! module's shared runtime (dispatch, release, thread start) act alike in every component, and
//! the kernel calls its first component's. A module of one component may export either form;
//! the Rust SDK always names them by component.

use crate::host_calls::IntType;

/// A function a component exports for the kernel to call.
#[derive(Debug, Clone, Copy)]
pub struct EntryPoint {
    /// The export name.
    pub name: &'static str,
    /// Parameter names and types.
    pub params: &'static [(&'static str, IntType)],
    /// The result type, if any.
    pub result: Option<IntType>,
    /// Whether every ordinary component must export it.
    pub required: bool,
    /// What the kernel calls it for, and what it must return.
    pub summary: &'static str,
}

impl EntryPoint {
    /// The entry point called `name`.
    pub fn named(name: &str) -> Option<&'static EntryPoint> {
        ENTRY_POINTS.iter().find(|e| e.name == name)
    }
}

/// The name under which a module that links several components exports `entry` of the
/// component called `component` (`domos_init:fs-ext2`). The Rust SDK's `component!` writes the
/// same names.
pub fn component_export<'a>(entry: &'a str, component: &'a str) -> impl core::fmt::Display + 'a {
    struct Named<'a>(&'a str, &'a str);
    impl core::fmt::Display for Named<'_> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            write!(f, "{}:{}", self.0, self.1)
        }
    }
    Named(entry, component)
}

/// The entry points of an ordinary component, required ones first.
pub const ENTRY_POINTS: &[EntryPoint] = &[
    EntryPoint {
        name: "domos_init",
        params: &[],
        result: Some(IntType::I32),
        required: true,
        summary: "Runs once when the domain boots, before any component's `main`; usually registers services. \
                  Returns 0, or an exit code that ends the domain (`init failed`).",
    },
    EntryPoint {
        name: "domos_thread_entry",
        params: &[("arg", IntType::U32)],
        result: Some(IntType::I32),
        required: true,
        summary: "The first function of a thread started by `thread_spawn(arg)`; returns its exit code, which \
                  `thread_join` hands back.",
    },
    EntryPoint {
        name: "domos_dispatch",
        params: &[
            ("object", IntType::U32),
            ("method", IntType::U32),
            ("buffer", IntType::U32),
            ("len", IntType::U32),
            ("capacity", IntType::U32),
        ],
        result: Some(IntType::I32),
        required: true,
        summary: "Runs one portal call on a service thread: `object` as given to `service_create`, `method` the \
                  method's identifier, the request's `len` bytes at `buffer` (a message buffer of `capacity` \
                  bytes). Writes the reply into the same buffer and returns its length, or a negative \
                  HostError code (UnknownMethod, BadRequest, MessageTooLarge).",
    },
    EntryPoint {
        name: "domos_release",
        params: &[("object", IntType::U32)],
        result: None,
        required: true,
        summary: "The last portal to the service of `object` is gone: the component may forget the object.",
    },
    EntryPoint {
        name: "domos_main",
        params: &[],
        result: Some(IntType::I32),
        required: false,
        summary: "The body of the component's first thread, started after every `init` of the system; \
                  returns its exit code.",
    },
    EntryPoint {
        name: "domos_interrupt",
        params: &[("source", IntType::U32), ("events", IntType::U32)],
        result: None,
        required: false,
        summary: "Handles `events` of interrupt source `source` (`timer_attach`, `disk_attach_interrupt`); the \
                  manifest must list it as `bounded`, and the loader proves it finishes in bounded time.",
    },
];

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn required_entry_points_come_first_and_names_are_unique() {
        let first_optional = ENTRY_POINTS.iter().position(|e| !e.required).unwrap();
        assert!(ENTRY_POINTS[first_optional..].iter().all(|e| !e.required));
        for (i, entry) in ENTRY_POINTS.iter().enumerate() {
            assert!(ENTRY_POINTS[i + 1..].iter().all(|e| e.name != entry.name), "{} twice", entry.name);
            assert!(entry.name.starts_with("domos_"));
        }
        assert_eq!(EntryPoint::named("domos_dispatch").unwrap().params.len(), 5);
        assert!(EntryPoint::named("main").is_none());
        use std::string::ToString;
        assert_eq!(component_export("domos_init", "fs-ext2").to_string(), "domos_init:fs-ext2");
    }
}
