//! The Domos verifier: what a component must satisfy before it is translated and run, beyond
//! wasm validation.
//!
//! * Imports: only the shared linear memory `env.memory` and host calls of the `domos` module
//!   that the kernel offers (`domos_abi::HOST_CALLS`), each with its declared type. Whether the
//!   component's domain was *granted* each call is checked when the component is placed in a
//!   domain (see `domos_abi::Grant`).
//! * No `memory.grow`: only the kernel grows a domain's heap, so memory accounting is exact.
//! * No `memory.atomic.wait` outside the start function: it would stall a kernel CPU; threads
//!   wait through the kernel instead.
//! * The entry points the kernel calls are exported with the right types: those of an ordinary
//!   component, of a local scheduler or of a global scheduler (see [`Kind`]).

use std::collections::BTreeSet;

use domos_abi::{HostCall, ValueType};
use wasmparser::{ExternalKind, FuncType, Operator, Parser, Payload, TypeRef, ValType, Validator, WasmFeatures};

/// What the verifier learnt about an accepted module.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The host calls the module imports.
    pub host_calls: BTreeSet<String>,
    /// The manifest text from the `domos:manifest` section.
    pub manifest_text: String,
    /// Whether the module exports `domos_main`.
    pub has_main: bool,
    /// What the kernel runs it as.
    pub kind: Kind,
}

/// What a component is to the kernel, told by its exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Threads and services: `domos_init`, `domos_dispatch`, ….
    Ordinary,
    /// A domain's local scheduler: exports `domos_sched_activated` (JX's domain scheduler).
    LocalScheduler,
    /// The global scheduler, which picks domains: exports `domos_global_pick`.
    GlobalScheduler,
}

/// Checks that host call `name` is imported with the type the kernel declares for it.
fn check_host_call_type(name: &str, ty: Option<&FuncType>) -> Result<(), String> {
    let value = |t: &ValType| match t {
        ValType::I32 => Some(ValueType::I32),
        ValType::I64 => Some(ValueType::I64),
        _ => None,
    };
    let call = HostCall::named(name).ok_or_else(|| format!("imports domos.{name}, which the kernel does not offer"))?;
    let fits = ty.is_some_and(|ty| {
        let params: Option<Vec<_>> = ty.params().iter().map(value).collect();
        let results: Option<Vec<_>> = ty.results().iter().map(value).collect();
        params.zip(results).is_some_and(|(p, r)| call.has_type(&p, &r))
    });
    if fits {
        return Ok(());
    }
    let params: Vec<_> = call.params.iter().map(|(_, t)| t.name()).collect();
    let result = call.result.map_or(String::new(), |r| format!(" -> {}", r.name()));
    Err(format!("imports domos.{name} with the wrong type; the kernel declares ({}){result}", params.join(", ")))
}

type Signature = (&'static str, &'static [ValType], &'static [ValType]);

/// The wasm features Domos components may use.
pub fn features() -> WasmFeatures {
    WasmFeatures::WASM2 | WasmFeatures::THREADS | WasmFeatures::TAIL_CALL | WasmFeatures::EXTENDED_CONST
}

/// Entry points every ordinary component exports, with their types.
const REQUIRED_EXPORTS: &[Signature] = &[
    ("domos_init", &[], &[ValType::I32]),
    ("domos_thread_entry", &[ValType::I32], &[ValType::I32]),
    ("domos_dispatch", &[ValType::I32, ValType::I32, ValType::I32, ValType::I32, ValType::I32], &[ValType::I32]),
    ("domos_release", &[ValType::I32], &[]),
];

/// The exports of a local scheduler: required ones first, then the optional notifications.
const LOCAL_SCHEDULER_EXPORTS: &[Signature] = &[
    ("domos_sched_runnable", &[ValType::I32, ValType::I32], &[]),
    ("domos_sched_preempted", &[ValType::I32, ValType::I32], &[]),
    ("domos_sched_activated", &[ValType::I32], &[ValType::I32]),
    ("domos_sched_interrupted", &[ValType::I32, ValType::I32], &[ValType::I32]),
    ("domos_sched_portal_call", &[ValType::I32], &[ValType::I32]),
    ("domos_sched_incoming_call", &[ValType::I32], &[ValType::I32]),
];

/// How many of [`LOCAL_SCHEDULER_EXPORTS`] a local scheduler must export.
const LOCAL_SCHEDULER_REQUIRED: usize = 3;

/// The exports of a global scheduler, all required.
const GLOBAL_SCHEDULER_EXPORTS: &[Signature] = &[
    ("domos_global_runnable", &[ValType::I32, ValType::I32], &[]),
    ("domos_global_idle", &[ValType::I32], &[]),
    ("domos_global_pick", &[ValType::I32], &[ValType::I32]),
    ("domos_global_ran", &[ValType::I32, ValType::I64], &[]),
];

/// What the loader accepts of a module, so that nothing it accepts fails translation or
/// instantiation later, and so that the time and memory translation takes stay bounded: the
/// largest of Domos' own components is 160 KB with 200 functions, bodies of 16 KB and 63 locals.
pub mod limits {
    /// Bytes of a module.
    pub const MODULE_BYTES: usize = 8 << 20;
    /// Functions, imported and defined.
    pub const FUNCTIONS: u32 = 10_000;
    /// Bytes of one function body.
    pub const BODY_BYTES: usize = 1 << 20;
    /// Locals of one function (wasmtime translates at most 50,000; the stack guard adds one).
    pub const LOCALS: u64 = 10_000;
    /// Targets of one `br_table`.
    pub const BR_TABLE_TARGETS: u32 = 16_384;
    /// Globals, which each take a slot in the kernel's per-instance state.
    pub const GLOBALS: u32 = 10_000;
    /// Tables: one, the function table, as the kernel's instance pool holds.
    pub const TABLES: u32 = 1;
    /// Initial elements of the table: what the kernel's instance pool reserves.
    pub const TABLE_ELEMENTS: u64 = 20_000;
}

/// How a component's heap is shared, which decides the build the verifier expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapKind {
    /// A shared memory for the threads of a compiled domain (`wasm32-wasip1-threads` build).
    Shared,
    /// An unshared memory for the single store of an interpreted domain
    /// (`wasm32-unknown-unknown` build, no atomics).
    Single,
}

/// Checks `bytes`; returns what the kernel needs to know, or the reason for rejection.
///
/// # Errors
/// A message for people naming the offending import, function or export.
pub fn verify(bytes: &[u8], heap: HeapKind) -> Result<Verified, String> {
    if bytes.len() > limits::MODULE_BYTES {
        return Err(format!("is {} bytes; a component may have at most {}", bytes.len(), limits::MODULE_BYTES));
    }
    let features = match heap {
        HeapKind::Shared => features(),
        HeapKind::Single => features() - WasmFeatures::THREADS,
    };
    Validator::new_with_features(features).validate_all(bytes).map_err(|e| format!("invalid WebAssembly: {e}"))?;

    let mut types: Vec<FuncType> = Vec::new();
    let mut func_types: Vec<u32> = Vec::new();
    let mut imported_funcs = 0u32;
    let mut host_calls = BTreeSet::new();
    let mut manifest_text = None;
    let mut start = None;
    let mut exports: Vec<(String, ExternalKind, u32)> = Vec::new();
    let mut heap_import = false;
    let mut function_names: Vec<(u32, String)> = Vec::new();
    let mut code_index = 0u32;
    let mut bodies = Vec::new();

    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("invalid WebAssembly: {e}"))? {
            Payload::TypeSection(reader) => {
                for group in reader {
                    let group = group.map_err(|e| e.to_string())?;
                    for sub in group.into_types() {
                        match sub.composite_type.inner {
                            wasmparser::CompositeInnerType::Func(f) => types.push(f),
                            _ => return Err("only function types are allowed".into()),
                        }
                    }
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.map_err(|e| e.to_string())?;
                    match (import.module, import.name, import.ty) {
                        ("env", "memory", TypeRef::Memory(m))
                            if m.shared == (heap == HeapKind::Shared) && !m.memory64 =>
                        {
                            // The kernel provides a heap that may grow to 4 GiB (a page less
                            // with explicit bounds checks); an import that wants less would
                            // not link.
                            if m.maximum.is_some_and(|max| max < 65536) {
                                return Err(format!(
                                    "imports env.memory with a maximum of {} pages; the kernel's heaps may have 65536",
                                    m.maximum.unwrap_or_default()
                                ));
                            }
                            heap_import = true;
                        }
                        ("env", "memory", _) => {
                            return Err(match heap {
                                HeapKind::Shared => "imports env.memory, which must be a shared 32-bit memory (build with the Domos SDK for wasm32-wasip1-threads)",
                                HeapKind::Single => "imports env.memory, which must be an unshared 32-bit memory (build with the Domos SDK for wasm32-unknown-unknown)",
                            }
                            .into());
                        }
                        (domos_abi::HOST_MODULE, name, TypeRef::Func(ty)) if HostCall::named(name).is_some() => {
                            check_host_call_type(name, types.get(ty as usize))?;
                            func_types.push(ty);
                            imported_funcs += 1;
                            host_calls.insert(name.to_string());
                        }
                        (module, name, _) => {
                            return Err(format!("imports {module}.{name}, which the kernel does not offer"));
                        }
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                if imported_funcs.saturating_add(reader.count()) > limits::FUNCTIONS {
                    return Err(format!(
                        "has {} functions; a component may have at most {}",
                        imported_funcs.saturating_add(reader.count()),
                        limits::FUNCTIONS
                    ));
                }
                for ty in reader {
                    func_types.push(ty.map_err(|e| e.to_string())?);
                }
            }
            Payload::GlobalSection(reader) if reader.count() > limits::GLOBALS => {
                return Err(format!(
                    "has {} globals; a component may have at most {}",
                    reader.count(),
                    limits::GLOBALS
                ));
            }
            Payload::TableSection(reader) => {
                if reader.count() > limits::TABLES {
                    return Err(format!(
                        "has {} tables; a component may have at most {}",
                        reader.count(),
                        limits::TABLES
                    ));
                }
                for table in reader {
                    // A maximum beyond the pool's is harmless: table.grow fails there.
                    let initial = table.map_err(|e| e.to_string())?.ty.initial;
                    if initial > limits::TABLE_ELEMENTS {
                        return Err(format!(
                            "has a table of {initial} elements; a component's table may have at most {}",
                            limits::TABLE_ELEMENTS
                        ));
                    }
                }
            }
            Payload::MemorySection(reader) if reader.count() > 0 => {
                return Err("defines its own memory; a component imports its domain's heap as env.memory".into());
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(|e| e.to_string())?;
                    exports.push((export.name.to_string(), export.kind, export.index));
                }
            }
            Payload::StartSection { func, .. } => start = Some(func),
            Payload::CodeSectionEntry(body) => {
                bodies.push((imported_funcs + code_index, body));
                code_index += 1;
            }
            Payload::CustomSection(section) => {
                if section.name() == domos_abi::MANIFEST_SECTION {
                    let text =
                        std::str::from_utf8(section.data()).map_err(|_| "the manifest is not UTF-8".to_string())?;
                    manifest_text = Some(text.to_string());
                } else if let wasmparser::KnownCustom::Name(names) = section.as_known() {
                    for name in names.into_iter().flatten() {
                        if let wasmparser::Name::Function(map) = name {
                            for naming in map.into_iter().flatten() {
                                function_names.push((naming.index, naming.name.to_string()));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }

    let describe = |index: u32| {
        function_names
            .iter()
            .find(|(i, _)| *i == index)
            .map_or_else(|| format!("function {index}"), |(_, n)| format!("function {index} ({n})"))
    };
    for (index, body) in bodies {
        if body.range().len() > limits::BODY_BYTES {
            return Err(format!(
                "{} is {} bytes long; a function may have at most {}",
                describe(index),
                body.range().len(),
                limits::BODY_BYTES
            ));
        }
        let mut locals = 0u64;
        for group in body.get_locals_reader().map_err(|e| e.to_string())? {
            locals += u64::from(group.map_err(|e| e.to_string())?.0);
        }
        if locals > limits::LOCALS {
            return Err(format!(
                "{} has {locals} locals; a function may have at most {}",
                describe(index),
                limits::LOCALS
            ));
        }
        let mut reader = body.get_operators_reader().map_err(|e| e.to_string())?;
        while !reader.eof() {
            match reader.read().map_err(|e| e.to_string())? {
                Operator::BrTable { targets } if targets.len() > limits::BR_TABLE_TARGETS => {
                    return Err(format!(
                        "{} has a br_table of {} targets; a br_table may have at most {}",
                        describe(index),
                        targets.len(),
                        limits::BR_TABLE_TARGETS
                    ));
                }
                Operator::MemoryGrow { .. } => {
                    return Err(format!(
                        "{} executes memory.grow; only the kernel grows a domain's heap",
                        describe(index)
                    ));
                }
                Operator::MemoryAtomicWait32 { .. } | Operator::MemoryAtomicWait64 { .. } if Some(index) != start => {
                    return Err(format!(
                        "{} executes memory.atomic.wait, which would stall a kernel CPU; wait through the kernel",
                        describe(index)
                    ));
                }
                _ => {}
            }
        }
    }

    if !heap_import {
        return Err("does not import its heap as a shared env.memory (build with the Domos SDK)".into());
    }
    let func_type = |index: u32| func_types.get(index as usize).and_then(|t| types.get(*t as usize));
    let exported = |name: &str| exports.iter().find(|(n, kind, _)| n == name && *kind == ExternalKind::Func);
    let kind = if exported("domos_sched_activated").is_some() {
        Kind::LocalScheduler
    } else if exported("domos_global_pick").is_some() {
        Kind::GlobalScheduler
    } else {
        Kind::Ordinary
    };
    let (signatures, required) = match kind {
        Kind::Ordinary => (REQUIRED_EXPORTS, REQUIRED_EXPORTS.len()),
        Kind::LocalScheduler => (LOCAL_SCHEDULER_EXPORTS, LOCAL_SCHEDULER_REQUIRED),
        Kind::GlobalScheduler => (GLOBAL_SCHEDULER_EXPORTS, GLOBAL_SCHEDULER_EXPORTS.len()),
    };
    for (i, (name, params, results)) in signatures.iter().enumerate() {
        let Some((_, _, index)) = exported(name) else {
            if i < required {
                return Err(format!("does not export the entry point {name}"));
            }
            continue;
        };
        match func_type(*index) {
            Some(t) if t.params() == *params && t.results() == *results => {}
            _ => return Err(format!("exports {name} with the wrong type")),
        }
    }
    if !exports.iter().any(|(n, kind, _)| n == "__stack_pointer" && *kind == ExternalKind::Global) {
        return Err("does not export __stack_pointer, which the kernel sets for each thread".into());
    }
    let has_main = match exported("domos_main") {
        Some((_, _, index)) => match func_type(*index) {
            Some(t) if t.params().is_empty() && t.results() == [ValType::I32] => true,
            _ => return Err("exports domos_main with the wrong type".into()),
        },
        None => false,
    };
    let manifest_text = manifest_text.ok_or_else(|| format!("has no {} section", domos_abi::MANIFEST_SECTION))?;
    Ok(Verified { host_calls, manifest_text, has_main, kind })
}
