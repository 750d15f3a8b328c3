//! Translation engines: one wasmtime engine per code generation (`domos_loader::codegen`).
//!
//! Compiled modules are kept per component in memory and, for Cranelift, on disk in wasmtime's
//! code cache, so a second boot does not compile again.

use std::path::PathBuf;
use wasmtime::{Cache, CacheConfig, Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use domos_loader::codegen::{BoundsChecks, CodeGen, Translator};
use domos_loader::verifier::limits;

const WASM_PAGE: u64 = 65536;

/// Bytes of each pooled table kept resident between threads (a component's function table is a
/// few KiB).
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// Largest wasm call stack of a thread; a deeper recursion traps with a stack overflow.
pub const MAX_WASM_STACK: usize = 512 * 1024;

/// A thread's fiber: the thread's own wasm stack, one per nested portal call
/// (`store::MAX_NESTING`) and one for a memory-fault upcall, each `MAX_WASM_STACK` (wasmtime
/// gives every store it enters that much below the current stack pointer), and room for the
/// host's frames between them. Only the pages a thread touches are resident.
pub const FIBER_STACK: usize = (super::store::MAX_NESTING as usize + 2) * MAX_WASM_STACK + 256 * 1024;

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
        // Metered code is bounded by its fuel, which also stops a loop without epoch checks.
        .epoch_interruption(code.preemption && !code.metered)
        .consume_fuel(code.metered)
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(FIBER_STACK);
    match translator {
        Translator::Cranelift => {
            // Threads and service threads are instances whose heaps are shared memories made
            // outside the pool: pooling their instance state and fiber stacks makes a thread start
            // without mmap.
            let mut pool = PoolingAllocationConfig::default();
            pool.total_core_instances(MAX_STORES)
                .total_stacks(MAX_STORES)
                .total_tables(MAX_STORES)
                // What the loader lets a component have: nothing it accepted fails here.
                .max_tables_per_module(limits::TABLES)
                .table_elements(limits::TABLE_ELEMENTS as usize)
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
            // For engineers profiling with `perf`: the names of compiled component functions.
            if std::env::var_os("DOMOS_PERFMAP").is_some() {
                config.profiler(wasmtime::ProfilingStrategy::PerfMap);
            }
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
