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

/// Builds the engine of one translator.
///
/// # Errors
/// When wasmtime rejects the configuration (an unsupported host).
pub fn engine(translator: Translator) -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    // Pulley cannot execute shared memories or atomics: a Pulley engine has no wasm threads and
    // runs the single-threaded build of each component in a single store.
    let threads = translator == Translator::Cranelift;
    config
        .wasm_threads(threads)
        .shared_memory(threads)
        .epoch_interruption(true)
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
                .max_memories_per_module(0);
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
