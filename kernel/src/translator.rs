//! Translation of verified components to executable code: Cranelift (native code) or Pulley
//! (wasmtime's portable interpreter), chosen per domain.
//!
//! Each translator has one wasmtime engine for the whole system. Compiled modules are kept per
//! component in memory and, for Cranelift, on disk in wasmtime's code cache, so a second boot
//! does not compile again.

use serde::Deserialize;
use std::path::PathBuf;
use wasmtime::{Cache, CacheConfig, Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

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
}

impl Default for CodeGen {
    fn default() -> Self {
        CodeGen { translator: Translator::Cranelift, bounds: BoundsChecks::GuardPages, preemption: true }
    }
}

impl CodeGen {
    /// Number of distinct [`CodeGen::index`] values.
    pub const COUNT: usize = 8;

    /// Index into per-code-generation tables.
    pub fn index(self) -> usize {
        self.translator.index() * 4 + self.bounds as usize * 2 + usize::from(self.preemption)
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
        format!("{}, {bounds}, {preemption}", self.translator.name())
    }
}

const WASM_PAGE: u64 = 65536;

/// Bytes of each pooled table kept resident between threads (a component's function table is a
/// few KiB).
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// Largest wasm call stack of a thread; a deeper recursion traps with a stack overflow.
pub const MAX_WASM_STACK: usize = 512 * 1024;

/// Most thread and service-thread stores of compiled domains alive at once, system-wide.
pub const MAX_STORES: u32 = 4096;

/// Where compiled code is cached between boots.
fn cache_directory() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOMOS_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache").join("domos"))
}

/// Builds the engine of one code generation.
///
/// # Errors
/// When wasmtime rejects the configuration (an unsupported host).
pub fn engine(code: CodeGen) -> wasmtime::Result<Engine> {
    let translator = code.translator;
    let mut config = Config::new();
    // Pulley cannot execute shared memories or atomics: a Pulley engine has no wasm threads and
    // runs the single-threaded build of each component in a single store.
    let threads = translator == Translator::Cranelift;
    config
        .wasm_threads(threads)
        .shared_memory(threads)
        .epoch_interruption(code.preemption)
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(MAX_WASM_STACK + 256 * 1024);
    match translator {
        Translator::Cranelift => {
            // Threads and service threads are instances whose heaps are shared memories made
            // outside the pool: pooling their instance state and fiber stacks makes a thread start
            // without mmap.
            let mut pool = PoolingAllocationConfig::default();
            pool.total_core_instances(MAX_STORES)
                .total_stacks(MAX_STORES)
                .total_tables(MAX_STORES)
                .total_memories(0)
                .max_memories_per_module(0)
                // A thread's table is zeroed for the next thread instead of returned to the OS:
                // the madvise and its TLB shootdown on the other CPU cost more than the memset.
                .table_keep_resident(TABLE_KEEP_RESIDENT);
            pool.max_memory_size(code.max_heap_pages() as usize * WASM_PAGE as usize);
            if code.bounds == BoundsChecks::Explicit {
                // A reservation one page short of every 32-bit address and no guard region:
                // Cranelift must compare each address with the reservation's end. (A shared
                // memory cannot move, so it must still be reserved whole up front.)
                config
                    .memory_reservation(u64::from(code.max_heap_pages()) * WASM_PAGE)
                    .memory_guard_size(0)
                    .memory_reservation_for_growth(0);
            }
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
            if std::env::var_os("DOMOS_NO_CODE_CACHE").is_none()
                && let Some(dir) = cache_directory()
            {
                let mut cache = CacheConfig::new();
                cache.with_directory(dir);
                config.cache(Some(Cache::new(cache)?));
            }
        }
        Translator::Pulley => {
            config.target("pulley64")?;
        }
    }
    Engine::new(&config)
}
