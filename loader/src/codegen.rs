//! How a domain's components become executable code: the translator (Cranelift's native code
//! or Pulley, wasmtime's portable interpreter), its bounds checks and its preemption checks,
//! chosen per domain by the configuration. The kernel makes one engine per combination.

use serde::Deserialize;

/// How a domain's components are turned into executable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Translator {
    /// Native code from Cranelift.
    #[default]
    Cranelift,
    /// Pulley bytecode, interpreted.
    Pulley,
}

impl Translator {
    /// Index into per-translator tables.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name used in configurations.
    pub fn name(self) -> &'static str {
        match self {
            Translator::Cranelift => "cranelift",
            Translator::Pulley => "pulley",
        }
    }
}

/// How a domain's accesses to its heap are kept inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BoundsChecks {
    /// Every heap is a 4 GiB reservation plus guard pages, so a 32-bit address can never leave it
    /// and compiled code needs no check; an access beyond the heap faults and traps.
    #[default]
    GuardPages,
    /// Compiled code compares each address with the heap's length: no large reservation
    /// (the software-fault-isolation style the paper's Omniware used). Pulley always checks so.
    Explicit,
}

/// Everything that decides how a domain's components become executable code: the translator,
/// its bounds checks, and whether the code is interrupted at the end of a time slice. Each
/// combination has an engine of its own, made when the first domain needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodeGen {
    /// Cranelift or Pulley.
    pub translator: Translator,
    /// Guard pages or explicit checks (Pulley: always explicit).
    pub bounds: BoundsChecks,
    /// Whether loops and calls check the epoch, so that the timer can preempt the code and
    /// termination can stop it. Without, a loop that does not end keeps its CPU: only for code
    /// that is short by construction (a graft) and trusted to stay so.
    pub preemption: bool,
    /// Whether the code counts the instructions it executes (wasmtime's fuel), so that a call can
    /// be bounded by its own work rather than by the clock: scheduler components, which run
    /// while the kernel holds scheduling locks. Never chosen by a configuration.
    pub metered: bool,
}

impl Default for CodeGen {
    fn default() -> Self {
        CodeGen {
            translator: Translator::Cranelift,
            bounds: BoundsChecks::GuardPages,
            preemption: true,
            metered: false,
        }
    }
}

impl CodeGen {
    /// Number of distinct [`CodeGen::index`] values.
    pub const COUNT: usize = 16;

    /// Index into per-code-generation tables.
    pub fn index(self) -> usize {
        self.translator.index() * 8
            + self.bounds as usize * 4
            + usize::from(self.preemption) * 2
            + usize::from(self.metered)
    }

    /// Most 64 KiB pages a component heap of this code generation may have: all of wasm32's
    /// 4 GiB, or one page less with explicit checks, whose reservation must hold the whole heap
    /// and yet end before 4 GiB for the checks to be needed.
    pub fn max_heap_pages(self) -> u32 {
        match self.bounds {
            BoundsChecks::GuardPages => 65536,
            BoundsChecks::Explicit => 65535,
        }
    }

    /// The configuration for people, e.g. `cranelift, explicit bounds checks, no preemption`.
    pub fn describe(self) -> String {
        let bounds = match self.bounds {
            BoundsChecks::GuardPages => "guard pages",
            BoundsChecks::Explicit => "explicit bounds checks",
        };
        let preemption = if self.preemption { "preemptible" } else { "no preemption" };
        let metered = if self.metered { ", metered" } else { "" };
        format!("{}, {bounds}, {preemption}{metered}", self.translator.name())
    }
}
