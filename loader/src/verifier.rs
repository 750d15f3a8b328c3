//! The Domos verifier: what a component must satisfy before it is translated and run, beyond
//! wasm validation.
//!
//! * Imports: only the shared linear memory `env.memory` and host calls of the `domos` module
//!   that the kernel offers (`domos_abi::HOST_CALLS`), each with its declared type. Whether the
//!   component's domain was *granted* each call is checked when the component is placed in a
//!   domain (see `domos_abi::Grant`).
//! * No `memory.grow`: only the kernel grows a domain's heap, so memory accounting is exact.
//! * No `memory.atomic.wait` outside the start function, which may wait only while nothing else
//!   can call it (no call, export, table entry or `ref.func` names it): a wait would stall a
//!   kernel CPU; threads wait through the kernel instead.
//! * The entry points the kernel calls are exported with the right types: those of an ordinary
//!   component (`domos_abi::ENTRY_POINTS`), of a local scheduler or of a global scheduler (see
//!   [`Kind`]).
//! * The build fits the domains that will run it: a threaded build (shared heap, atomics) for
//!   compiled domains, a single-threaded one (unshared heap) for interpreted ones ([`HeapKind`]).

use std::collections::BTreeSet;

use domos_abi::{ENTRY_POINTS, HostCall, IntType, ValueType};
use wasmparser::{ExternalKind, FuncType, Operator, Parser, Payload, TypeRef, ValType, Validator, WasmFeatures};

/// What the verifier learnt about an accepted module.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The host calls the module imports.
    pub host_calls: BTreeSet<String>,
    /// The manifests, from the module's `domos:manifest` sections, in the module's order.
    pub manifests: Vec<ManifestSection>,
    /// The names of the functions the module exports.
    pub function_exports: BTreeSet<String>,
    /// What the kernel runs it as.
    pub kind: Kind,
    /// The waits of the start function (LLVM's memory initialisation waits while another thread
    /// initialises): the kernel makes each return when it terminates the domain.
    pub start_waits: Vec<StartWait>,
}

/// A manifest as the module carries it: the text of a `domos:manifest` section (a module of one
/// component) or of a `domos:manifest:NAME` section (one of each component of a module that
/// links several).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestSection {
    /// `NAME` of a `domos:manifest:NAME` section.
    pub component: Option<String>,
    /// The manifest's TOML text.
    pub text: String,
}

/// A `memory.atomic.wait` of the start function, on a constant address for a constant value:
/// writing any other value there and notifying makes every such wait return, now and later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartWait {
    /// The address waited on.
    pub address: u32,
    /// The value the wait expects there.
    pub expected: u64,
    /// Whether it is `memory.atomic.wait64` (else `wait32`).
    pub wide: bool,
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
    let params: Vec<_> = call.params.iter().map(|(_, t)| t.wasm().name()).collect();
    let result = call.result.map_or(String::new(), |r| format!(" -> {}", r.wasm().name()));
    Err(format!("imports domos.{name} with the wrong type; the kernel declares ({}){result}", params.join(", ")))
}

/// Adds the functions a constant expression names (`ref.func`) to `functions`.
fn functions_named(expression: &wasmparser::ConstExpr<'_>, functions: &mut BTreeSet<u32>) -> Result<(), String> {
    let mut reader = expression.get_operators_reader();
    while !reader.eof() {
        if let Operator::RefFunc { function_index } = reader.read().map_err(|e| e.to_string())? {
            functions.insert(function_index);
        }
    }
    Ok(())
}

type Signature = (&'static str, &'static [ValType], &'static [ValType]);

/// The wasm features Domos components may use.
pub fn features() -> WasmFeatures {
    WasmFeatures::WASM2 | WasmFeatures::THREADS | WasmFeatures::TAIL_CALL | WasmFeatures::EXTENDED_CONST
}

/// The wasm type of an entry point's parameter or result.
fn val_type(ty: IntType) -> ValType {
    match ty.wasm() {
        ValueType::I32 => ValType::I32,
        ValueType::I64 => ValType::I64,
    }
}

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

/// Why a threaded build cannot be the single-threaded one.
const THREADED_AS_SINGLE: &str = "is a threaded build (shared memory, atomics), but interpreted domains run the \
                                  single-threaded build: an unshared memory, no atomics (Rust: \
                                  wasm32-unknown-unknown; clang: without -matomics and -Wl,--shared-memory)";

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
    verify_from(bytes, heap, Source::Module)
}

/// Checks code the stack guard has instrumented (`Component::code`) as [`verify`] checks a
/// module, except that it must export the guard's `__stack_limit` (once), where a module must
/// not; returns what `verify` returned of the module.
///
/// # Errors
/// As for [`verify`].
pub fn verify_code(bytes: &[u8], heap: HeapKind) -> Result<Verified, String> {
    verify_from(bytes, heap, Source::Instrumented)
}

/// What [`verify_from`] checks: a module as built, or as the stack guard left it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Module,
    Instrumented,
}

fn verify_from(bytes: &[u8], heap: HeapKind, source: Source) -> Result<Verified, String> {
    if bytes.len() > limits::MODULE_BYTES {
        return Err(format!("is {} bytes; a component may have at most {}", bytes.len(), limits::MODULE_BYTES));
    }
    if !bytes.starts_with(b"\0asm") {
        return Err("is not a WebAssembly module (it does not begin with \\0asm)".into());
    }
    let features = match heap {
        HeapKind::Shared => features(),
        HeapKind::Single => features() - WasmFeatures::THREADS,
    };
    if let Err(e) = Validator::new_with_features(features).validate_all(bytes) {
        // A threaded build offered where the single-threaded one belongs fails validation for
        // its shared memory or atomics; say so rather than quote the validator.
        if heap == HeapKind::Single && Validator::new_with_features(self::features()).validate_all(bytes).is_ok() {
            return Err(THREADED_AS_SINGLE.into());
        }
        return Err(format!("invalid WebAssembly: {e}"));
    }

    let mut types: Vec<FuncType> = Vec::new();
    let mut func_types: Vec<u32> = Vec::new();
    let mut imported_funcs = 0u32;
    let mut host_calls = BTreeSet::new();
    let mut manifests = Vec::new();
    let mut start = None;
    let mut exports: Vec<(String, ExternalKind, u32)> = Vec::new();
    let mut heap_import = false;
    // Whether each global is a mutable `i32` (a component imports none).
    let mut mutable_i32: Vec<bool> = Vec::new();
    let mut function_names: Vec<(u32, String)> = Vec::new();
    let mut code_index = 0u32;
    let mut bodies = Vec::new();
    // Functions something besides the start section names: a call, an export, a table entry, a
    // `ref.func`. Code can reach only these (and the entry points, which are exports).
    let mut referenced = BTreeSet::new();

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
                        ("env", "memory", TypeRef::Memory(m)) if m.shared && !m.memory64 => {
                            return Err(THREADED_AS_SINGLE.into());
                        }
                        ("env", "memory", TypeRef::Memory(m)) if !m.memory64 && heap == HeapKind::Shared => {
                            return Err("is a single-threaded build (its env.memory is not shared), but compiled \
                                        domains run the threaded build: a shared memory (Rust: wasm32-wasip1-threads; \
                                        clang: -matomics and -Wl,--shared-memory)"
                                .into());
                        }
                        ("env", "memory", _) => {
                            return Err("imports env.memory, which must be a 32-bit memory".into());
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
                    if export.kind == ExternalKind::Func {
                        referenced.insert(export.index);
                    }
                    exports.push((export.name.to_string(), export.kind, export.index));
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    let global = global.map_err(|e| e.to_string())?;
                    mutable_i32.push(global.ty.mutable && global.ty.content_type == ValType::I32);
                    functions_named(&global.init_expr, &mut referenced)?;
                }
            }
            Payload::ElementSection(reader) => {
                for element in reader {
                    match element.map_err(|e| e.to_string())?.items {
                        wasmparser::ElementItems::Functions(functions) => {
                            for function in functions {
                                referenced.insert(function.map_err(|e| e.to_string())?);
                            }
                        }
                        wasmparser::ElementItems::Expressions(_, expressions) => {
                            for expression in expressions {
                                functions_named(&expression.map_err(|e| e.to_string())?, &mut referenced)?;
                            }
                        }
                    }
                }
            }
            Payload::StartSection { func, .. } => start = Some(func),
            Payload::CodeSectionEntry(body) => {
                bodies.push((imported_funcs + code_index, body));
                code_index += 1;
            }
            Payload::CustomSection(section) => {
                if let Some(rest) = section.name().strip_prefix(domos_abi::MANIFEST_SECTION)
                    && (rest.is_empty() || rest.starts_with(':'))
                {
                    let text =
                        std::str::from_utf8(section.data()).map_err(|_| "the manifest is not UTF-8".to_string())?;
                    let component = rest.strip_prefix(':').map(str::to_string);
                    manifests.push(ManifestSection { component, text: text.to_string() });
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
    let mut start_waits = Vec::new();
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
        // The last three constants pushed, for the operands of a wait in the start function.
        let mut constants: [Option<i64>; 3] = [None; 3];
        while !reader.eof() {
            let operator = reader.read().map_err(|e| e.to_string())?;
            let constant = match operator {
                Operator::I32Const { value } => Some(i64::from(value)),
                Operator::I64Const { value } => Some(value),
                _ => None,
            };
            let operands = constants;
            constants = [constants[1], constants[2], constant];
            match operator {
                Operator::BrTable { targets } if targets.len() > limits::BR_TABLE_TARGETS => {
                    return Err(format!(
                        "{} has a br_table of {} targets; a br_table may have at most {}",
                        describe(index),
                        targets.len(),
                        limits::BR_TABLE_TARGETS
                    ));
                }
                Operator::Call { function_index }
                | Operator::ReturnCall { function_index }
                | Operator::RefFunc { function_index } => {
                    referenced.insert(function_index);
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
                Operator::MemoryAtomicWait32 { .. } | Operator::MemoryAtomicWait64 { .. } => {
                    // Only the constant form LLVM emits, so that the kernel knows where it waits.
                    let [Some(address), Some(expected), Some(_)] = operands else {
                        return Err(format!(
                            "{} executes memory.atomic.wait on operands that are not constants; the start function \
                             may wait only on a constant address for a constant value",
                            describe(index)
                        ));
                    };
                    let wide = matches!(operator, Operator::MemoryAtomicWait64 { .. });
                    start_waits.push(StartWait { address: address as u32, expected: expected as u64, wide });
                }
                _ => {}
            }
        }
    }
    if let Some(start) = start.filter(|s| !start_waits.is_empty() && referenced.contains(s)) {
        return Err(format!(
            "{} executes memory.atomic.wait, which would stall a kernel CPU; only a start function that nothing \
             else calls may wait",
            describe(start)
        ));
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
    // Each entry point with its type and whether the module must export it. An ordinary
    // component's are exported as `domos_init`, or `domos_init:NAME` for each component NAME of
    // a module of several: which component must export which is the manifests' to say
    // (`Component`).
    let per_component = kind == Kind::Ordinary;
    let signatures: Vec<(&str, Vec<ValType>, Vec<ValType>, bool)> = match kind {
        Kind::Ordinary => ENTRY_POINTS
            .iter()
            .map(|e| {
                let params = e.params.iter().map(|(_, t)| val_type(*t)).collect();
                (e.name, params, e.result.map(val_type).into_iter().collect(), false)
            })
            .collect(),
        Kind::LocalScheduler => LOCAL_SCHEDULER_EXPORTS
            .iter()
            .enumerate()
            .map(|(i, (name, params, results))| {
                (*name, params.to_vec(), results.to_vec(), i < LOCAL_SCHEDULER_REQUIRED)
            })
            .collect(),
        Kind::GlobalScheduler => GLOBAL_SCHEDULER_EXPORTS
            .iter()
            .map(|(name, params, results)| (*name, params.to_vec(), results.to_vec(), true))
            .collect(),
    };
    for (name, params, results, required) in &signatures {
        if *required && exported(name).is_none() {
            return Err(format!("does not export the entry point {name}"));
        }
        let forms = exports.iter().filter(|(n, kind, _)| {
            *kind == ExternalKind::Func
                && (n == name || (per_component && n.strip_prefix(name).is_some_and(|rest| rest.starts_with(':'))))
        });
        for (export, _, index) in forms {
            match func_type(*index) {
                Some(t) if t.params() == params.as_slice() && t.results() == results.as_slice() => {}
                _ => return Err(format!("exports {export} with the wrong type")),
            }
        }
    }
    match exports.iter().find(|(n, kind, _)| n == "__stack_pointer" && *kind == ExternalKind::Global) {
        None => return Err("does not export __stack_pointer, which the kernel sets for each thread".into()),
        // The kernel sets it to an `i32` (`set_stack`), and the stack guard checks only such a
        // pointer: any other would make every thread fail to start.
        Some((_, _, index)) if mutable_i32.get(*index as usize) != Some(&true) => {
            return Err("exports a __stack_pointer that is not a mutable i32 global, which the kernel sets for each \
                        thread"
                .into());
        }
        Some(_) => {}
    }
    // The stack guard adds this export; a module with it already would not translate. Code the
    // guard has instrumented has exactly its one.
    let limits = exports.iter().filter(|(n, _, _)| n == crate::instrument::LIMIT_GLOBAL).count();
    match (source, limits) {
        (Source::Module, 0) | (Source::Instrumented, 1) => {}
        (Source::Module, _) => {
            return Err(format!(
                "exports {}, a name the kernel's stack guard reserves",
                crate::instrument::LIMIT_GLOBAL
            ));
        }
        (Source::Instrumented, _) => {
            return Err(format!(
                "exports {limits} {}, where the stack guard adds one",
                crate::instrument::LIMIT_GLOBAL
            ));
        }
    }
    if manifests.is_empty() {
        return Err(format!("has no {} section", domos_abi::MANIFEST_SECTION));
    }
    let function_exports =
        exports.into_iter().filter(|(_, kind, _)| *kind == ExternalKind::Func).map(|(name, _, _)| name).collect();
    Ok(Verified { host_calls, manifests, function_exports, kind, start_waits })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"(@custom "domos:manifest" "name = \"t\"\nversion = \"1\"")"#;

    /// The entry points of an ordinary component, by name, with their signatures and bodies.
    const ENTRY_POINTS: [(&str, &str); 4] = [
        ("domos_init", "(result i32) i32.const 0"),
        ("domos_thread_entry", "(param i32) (result i32) i32.const 0"),
        ("domos_dispatch", "(param i32 i32 i32 i32 i32) (result i32) i32.const 0"),
        ("domos_release", "(param i32)"),
    ];

    /// A module importing a shared heap, then `imports`, defining `body`, exporting the stack
    /// pointer and carrying a manifest.
    fn module(imports: &str, body: &str) -> Vec<u8> {
        wat::parse_str(format!(
            r#"(module
              (import "env" "memory" (memory 1 65536 shared))
              {imports}
              {body}
              (global (export "__stack_pointer") (mut i32) (i32.const 65536))
              {MANIFEST})"#
        ))
        .unwrap()
    }

    /// The entry points of an ordinary component, except `skip`.
    fn entry_points(skip: &str) -> String {
        ENTRY_POINTS
            .iter()
            .filter(|(name, _)| *name != skip)
            .map(|(name, body)| format!("(func (export \"{name}\") {body})\n"))
            .collect()
    }

    /// An ordinary component with `imports` and the extra definitions `body`.
    fn ordinary(imports: &str, body: &str) -> Vec<u8> {
        module(imports, &format!("{}{body}", entry_points("")))
    }

    /// Why the loader refuses `bytes` as a component: the verifier's reason, or what the
    /// manifests require of the exports (`Component::load`).
    fn refusal(bytes: &[u8]) -> String {
        crate::component::Component::load(bytes).unwrap_err()
    }

    #[test]
    fn an_ordinary_component_is_accepted_and_described() {
        let bytes = ordinary(
            r#"(import "domos" "console_write" (func (param i32 i32)))
               (import "domos" "clock_ns" (func (result i64)))"#,
            r#"(func (export "domos_main") (result i32) i32.const 0)"#,
        );
        let verified = verify(&bytes, HeapKind::Shared).unwrap();
        assert_eq!(verified.host_calls, BTreeSet::from(["clock_ns".to_string(), "console_write".to_string()]));
        assert!(verified.function_exports.contains("domos_main"));
        assert_eq!(verified.kind, Kind::Ordinary);
        let manifest = ManifestSection { component: None, text: "name = \"t\"\nversion = \"1\"".into() };
        assert_eq!(verified.manifests, [manifest]);
        assert!(!verify(&ordinary("", ""), HeapKind::Shared).unwrap().function_exports.contains("domos_main"));
    }

    #[test]
    fn imports_outside_the_host_call_table_are_refused() {
        for (import, expected) in [
            (
                r#"(import "domos" "launch_missiles" (func))"#,
                "imports domos.launch_missiles, which the kernel does not offer",
            ),
            (
                r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
                "imports wasi_snapshot_preview1.fd_write, which the kernel does not offer",
            ),
            (r#"(import "env" "table" (table 1 funcref))"#, "imports env.table, which the kernel does not offer"),
            (r#"(import "env" "sp" (global i32))"#, "imports env.sp, which the kernel does not offer"),
            // A host call's name, but not a function.
            (r#"(import "domos" "clock_ns" (global i64))"#, "imports domos.clock_ns, which the kernel does not offer"),
            (
                r#"(import "Domos" "clock_ns" (func (result i64)))"#,
                "imports Domos.clock_ns, which the kernel does not offer",
            ),
        ] {
            assert_eq!(refusal(&ordinary(import, "")), expected);
        }
    }

    #[test]
    fn host_calls_imported_with_the_wrong_type_are_refused() {
        for (import, expected) in [
            (
                r#"(import "domos" "console_write" (func (param i32)))"#,
                "imports domos.console_write with the wrong type; the kernel declares (i32, i32)",
            ),
            (
                r#"(import "domos" "console_write" (func (param i32 i32) (result i64)))"#,
                "imports domos.console_write with the wrong type; the kernel declares (i32, i32)",
            ),
            (
                r#"(import "domos" "clock_ns" (func (result i32)))"#,
                "imports domos.clock_ns with the wrong type; the kernel declares () -> i64",
            ),
            (
                r#"(import "domos" "clock_ns" (func))"#,
                "imports domos.clock_ns with the wrong type; the kernel declares () -> i64",
            ),
            (
                r#"(import "domos" "clock_ns" (func (result i64 i64)))"#,
                "imports domos.clock_ns with the wrong type; the kernel declares () -> i64",
            ),
            (
                r#"(import "domos" "memory_create" (func (param f64) (result i64)))"#,
                "imports domos.memory_create with the wrong type; the kernel declares (i64) -> i64",
            ),
            (
                r#"(import "domos" "memory_create" (func (param i32) (result i64)))"#,
                "imports domos.memory_create with the wrong type; the kernel declares (i64) -> i64",
            ),
        ] {
            assert_eq!(refusal(&ordinary(import, "")), expected, "{import}");
        }
        // Every host call of the table is accepted with its declared type.
        for call in domos_abi::HOST_CALLS {
            let params: Vec<_> = call.params.iter().map(|(_, t)| t.wasm().name()).collect();
            let result = call.result.map_or(String::new(), |r| format!("(result {})", r.wasm().name()));
            let import = format!(r#"(import "domos" "{}" (func (param {}) {result}))"#, call.name, params.join(" "));
            let verified = verify(&ordinary(&import, ""), HeapKind::Shared).unwrap();
            assert_eq!(verified.host_calls.into_iter().collect::<Vec<_>>(), [call.name], "{import}");
        }
    }

    #[test]
    fn the_heap_is_an_imported_memory_shared_only_in_the_threaded_build() {
        let unshared = wat::parse_str(format!(
            r#"(module (import "env" "memory" (memory 1 65536)) {}
               (global (export "__stack_pointer") (mut i32) (i32.const 65536)) {MANIFEST})"#,
            entry_points("")
        ))
        .unwrap();
        assert!(refusal(&unshared).starts_with("is a single-threaded build (its env.memory is not shared)"));
        assert_eq!(verify(&unshared, HeapKind::Single).unwrap().kind, Kind::Ordinary);
        let shared = ordinary("", "");
        let single = verify(&shared, HeapKind::Single).unwrap_err();
        assert!(single.starts_with("is a threaded build"), "no threads in the single-threaded build: {single}");
        let own = wat::parse_str(format!(
            r#"(module (memory 1) {} (global (export "__stack_pointer") (mut i32) (i32.const 65536)) {MANIFEST})"#,
            entry_points("")
        ))
        .unwrap();
        assert_eq!(refusal(&own), "defines its own memory; a component imports its domain's heap as env.memory");
        let none = wat::parse_str(format!(
            r#"(module {} (global (export "__stack_pointer") (mut i32) (i32.const 65536)) {MANIFEST})"#,
            entry_points("")
        ))
        .unwrap();
        assert_eq!(refusal(&none), "does not import its heap as a shared env.memory (build with the Domos SDK)");
        assert_eq!(
            refusal(&ordinary(r#"(import "env" "memory2" (memory 1 1 shared))"#, "")).split(':').next(),
            Some("invalid WebAssembly"),
            "one memory only"
        );
    }

    #[test]
    fn memory_grow_is_refused_wherever_it_is() {
        let imports = r#"(import "domos" "clock_ns" (func (result i64)))"#;
        let grow = r#"(func $grow (export "grow") (result i32) (memory.grow (i32.const 1)))"#;
        assert_eq!(
            refusal(&ordinary(imports, grow)),
            "function 5 (grow) executes memory.grow; only the kernel grows a domain's heap",
            "named after the host call and the four entry points"
        );
        let unnamed = "(func (drop (memory.grow (i32.const 0))))";
        assert_eq!(
            refusal(&ordinary("", unnamed)),
            "function 4 executes memory.grow; only the kernel grows a domain's heap"
        );
        let start = "(func $init (drop (memory.grow (i32.const 1)))) (start $init)";
        assert!(refusal(&ordinary("", start)).contains("executes memory.grow"), "not even in the start function");
        assert!(verify(&ordinary("", "(func (drop (memory.size)))"), HeapKind::Shared).is_ok());
    }

    #[test]
    fn atomic_waits_are_refused_outside_the_start_function() {
        let imports = r#"(import "domos" "clock_ns" (func (result i64)))
                         (import "domos" "yield_now" (func))"#;
        let wait32 = "(drop (memory.atomic.wait32 (i32.const 0) (i32.const 0) (i64.const -1)))";
        let wait64 = "(drop (memory.atomic.wait64 (i32.const 8) (i64.const 0) (i64.const -1)))";
        for wait in [wait32, wait64] {
            // With host calls imported, the start function's index counts them.
            let start = format!("(func $init_memory {wait}) (start $init_memory)");
            assert!(verify(&ordinary(imports, &start), HeapKind::Shared).is_ok(), "{wait} in the start function");
            let other = format!("(func $spin {wait})");
            assert_eq!(
                refusal(&ordinary(imports, &other)),
                "function 6 (spin) executes memory.atomic.wait, which would stall a kernel CPU; wait through the kernel"
            );
            // The start function is exempt, not the functions it calls.
            let called = format!("(func $helper {wait}) (func $init_memory (call $helper)) (start $init_memory)");
            assert!(refusal(&ordinary(imports, &called)).contains("function 6 (helper) executes memory.atomic.wait"));
        }
        // Nor the start function itself when other code can reach it: a thread could call it and
        // wait for good on a kernel CPU.
        for reach in [
            r#"(func (export "loop") (call $init_memory))"#,
            r#"(func (export "loop") (return_call $init_memory))"#,
            r#"(table 1 funcref) (elem (i32.const 0) $init_memory)"#,
            r#"(table 1 funcref) (elem declare func $init_memory)
               (func (export "loop") (table.set (i32.const 0) (ref.func $init_memory)))"#,
            r#"(global funcref (ref.func $init_memory))"#,
            r#"(export "init_memory" (func $init_memory))"#,
        ] {
            let start = format!("(func $init_memory {wait32}) (start $init_memory) {reach}");
            assert_eq!(
                refusal(&ordinary(imports, &start)),
                "function 6 (init_memory) executes memory.atomic.wait, which would stall a kernel CPU; only a start \
                 function that nothing else calls may wait",
                "{reach}"
            );
        }
        let notify = "(func (drop (memory.atomic.notify (i32.const 0) (i32.const 1))))";
        assert!(verify(&ordinary("", notify), HeapKind::Shared).is_ok(), "waking is harmless");
    }

    #[test]
    fn ordinary_components_export_every_entry_point_with_its_type() {
        for (name, _) in ENTRY_POINTS {
            let missing = module("", &entry_points(name));
            // Each component of a module exports its own: which ones the manifests say.
            assert!(verify(&missing, HeapKind::Shared).is_ok());
            assert_eq!(refusal(&missing), format!("does not export the entry point {name}"));
            let wrong = module("", &format!("{}(func (export \"{name}\") (param i64))", entry_points(name)));
            assert_eq!(refusal(&wrong), format!("exports {name} with the wrong type"));
            let global = module("", &format!("{}(global (export \"{name}\") i32 (i32.const 0))", entry_points(name)));
            assert_eq!(refusal(&global), format!("does not export the entry point {name}"), "a global is no function");
        }
        let main = ordinary("", r#"(func (export "domos_main") (param i32) (result i32) i32.const 0)"#);
        assert_eq!(refusal(&main), "exports domos_main with the wrong type");
        let no_stack = wat::parse_str(format!(
            r#"(module (import "env" "memory" (memory 1 65536 shared)) {} {MANIFEST})"#,
            entry_points("")
        ))
        .unwrap();
        assert_eq!(refusal(&no_stack), "does not export __stack_pointer, which the kernel sets for each thread");
        // Found in fixing the `loader_component` fuzz target: a `__stack_pointer` the kernel
        // cannot set (immutable, or not an `i32`) was accepted, and then every thread of the
        // component failed to start (`set_stack`); the stack guard left it unguarded.
        for global in ["i32 (i32.const 65536)", "(mut i64) (i64.const 65536)"] {
            let fixed = wat::parse_str(format!(
                r#"(module (import "env" "memory" (memory 1 65536 shared)) {}
                   (global (export "__stack_pointer") {global}) {MANIFEST})"#,
                entry_points("")
            ))
            .unwrap();
            assert_eq!(
                refusal(&fixed),
                "exports a __stack_pointer that is not a mutable i32 global, which the kernel sets for each thread"
            );
        }
        let no_manifest = wat::parse_str(format!(
            r#"(module (import "env" "memory" (memory 1 65536 shared)) {}
               (global (export "__stack_pointer") (mut i32) (i32.const 65536)))"#,
            entry_points("")
        ))
        .unwrap();
        assert_eq!(refusal(&no_manifest), "has no domos:manifest section");
        // Found in writing the `loader_component` fuzz target's check that the code to translate
        // verifies: the stack guard exported a second `__stack_limit`, which made the module
        // invalid after the loader had accepted it.
        for kind in ["(global (export \"__stack_limit\") i32 (i32.const 0))", "(func (export \"__stack_limit\"))"] {
            let reserved = ordinary("", kind);
            assert_eq!(refusal(&reserved), "exports __stack_limit, a name the kernel's stack guard reserves");
        }
        // The code the stack guard makes of a module has the guard's `__stack_limit`, and
        // `verify_code` checks it as `verify` checks the module.
        let built = ordinary("", "");
        let code = crate::instrument::instrument(&built).unwrap();
        assert_eq!(refusal(&code), "exports __stack_limit, a name the kernel's stack guard reserves");
        let (of_module, of_code) =
            (verify(&built, HeapKind::Shared).unwrap(), verify_code(&code, HeapKind::Shared).unwrap());
        assert_eq!((of_code.manifests, of_code.kind), (of_module.manifests, of_module.kind));
        assert_eq!(
            verify_code(&built, HeapKind::Shared).unwrap_err(),
            "exports 0 __stack_limit, where the stack guard adds one"
        );
        // An exported host call is a function like any other: its type decides.
        let reexported = module(
            r#"(import "domos" "handle_drop" (func $drop (param i32) (result i64)))"#,
            &format!("{}(export \"domos_release\" (func $drop))", entry_points("domos_release")),
        );
        assert_eq!(refusal(&reexported), "exports domos_release with the wrong type");
    }

    fn exports(list: &[(&str, &str)]) -> String {
        list.iter().map(|(name, signature)| format!("(func (export \"{name}\") {signature} unreachable)\n")).collect()
    }

    #[test]
    fn a_local_scheduler_is_told_by_its_exports_and_needs_three_of_them() {
        let required = [
            ("domos_sched_runnable", "(param i32 i32)"),
            ("domos_sched_preempted", "(param i32 i32)"),
            ("domos_sched_activated", "(param i32) (result i32)"),
        ];
        let verified = verify(&module("", &exports(&required)), HeapKind::Shared).unwrap();
        assert_eq!(verified.kind, Kind::LocalScheduler, "no domos_init needed");
        let optional = [
            ("domos_sched_interrupted", "(param i32 i32) (result i32)"),
            ("domos_sched_portal_call", "(param i32) (result i32)"),
            ("domos_sched_incoming_call", "(param i32) (result i32)"),
        ];
        let all = [&required[..], &optional[..]].concat();
        assert_eq!(verify(&module("", &exports(&all)), HeapKind::Shared).unwrap().kind, Kind::LocalScheduler);
        for skip in ["domos_sched_runnable", "domos_sched_preempted"] {
            let some: Vec<_> = required.iter().copied().filter(|(n, _)| *n != skip).collect();
            assert_eq!(refusal(&module("", &exports(&some))), format!("does not export the entry point {skip}"));
        }
        for (name, _) in &all {
            let mut wrong = all.clone();
            wrong.iter_mut().filter(|(n, _)| n == name).for_each(|e| e.1 = "(param i64)");
            assert_eq!(refusal(&module("", &exports(&wrong))), format!("exports {name} with the wrong type"));
        }
        // Without `activated` it is an ordinary component missing its entry points.
        let no_activated = &required[..2];
        assert_eq!(refusal(&module("", &exports(no_activated))), "does not export the entry point domos_init");
    }

    #[test]
    fn a_global_scheduler_is_told_by_its_exports_and_needs_all_four() {
        let all = [
            ("domos_global_runnable", "(param i32 i32)"),
            ("domos_global_idle", "(param i32)"),
            ("domos_global_pick", "(param i32) (result i32)"),
            ("domos_global_ran", "(param i32 i64)"),
        ];
        assert_eq!(verify(&module("", &exports(&all)), HeapKind::Shared).unwrap().kind, Kind::GlobalScheduler);
        for (name, _) in &all[..] {
            let some: Vec<_> = all.iter().copied().filter(|(n, _)| n != name).collect();
            // Without `pick` it is an ordinary component missing its entry points.
            let missing = if *name == "domos_global_pick" { "domos_init" } else { name };
            assert_eq!(refusal(&module("", &exports(&some))), format!("does not export the entry point {missing}"));
        }
        let mut wrong = all;
        wrong[3].1 = "(param i32 i32)";
        assert_eq!(refusal(&module("", &exports(&wrong))), "exports domos_global_ran with the wrong type");
        // A module with both kinds' exports is a local scheduler, and must be a whole one.
        let both = [&all[..], &[("domos_sched_activated", "(param i32) (result i32)")]].concat();
        assert_eq!(refusal(&module("", &exports(&both))), "does not export the entry point domos_sched_runnable");
    }

    fn module_with_heap(memory: &str, extra: &str) -> Vec<u8> {
        wat::parse_str(format!(
            r#"(module
  (import "env" "memory" (memory {memory}))
  {extra}
  (global (export "__stack_pointer") (mut i32) (i32.const 65536))
  (func (export "domos_init") (result i32) i32.const 0)
  (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
  (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
  (func (export "domos_release") (param i32))
  (@custom "domos:manifest" "name = \"m\"\nversion = \"1\""))"#
        ))
        .unwrap()
    }

    const SHARED: &str = "1 65536 shared";
    const UNSHARED: &str = "1 65536";

    #[test]
    fn each_build_is_accepted_only_where_it_belongs() {
        assert!(verify(&module_with_heap(SHARED, ""), HeapKind::Shared).is_ok());
        assert!(verify(&module_with_heap(UNSHARED, ""), HeapKind::Single).is_ok());
        let threaded = verify(&module_with_heap(SHARED, ""), HeapKind::Single).unwrap_err();
        assert!(threaded.starts_with("is a threaded build"), "{threaded}");
        // With atomics in the code the validator refuses it first; the message is the same.
        let atomics = module_with_heap(SHARED, "(func (result i32) (i32.atomic.load (i32.const 0)))");
        assert_eq!(verify(&atomics, HeapKind::Single).unwrap_err(), threaded);
        let single = verify(&module_with_heap(UNSHARED, ""), HeapKind::Shared).unwrap_err();
        assert!(single.starts_with("is a single-threaded build"), "{single}");
    }

    #[test]
    fn what_is_not_wasm_is_said_so() {
        for bytes in [&b""[..], b"\x7fELF\x02\x01\x01", b"name = \"svc\"\n"] {
            assert_eq!(
                verify(bytes, HeapKind::Shared).unwrap_err(),
                "is not a WebAssembly module (it does not begin with \\0asm)"
            );
        }
        assert!(verify(b"\0asm\x01\0\0\0junk", HeapKind::Shared).unwrap_err().starts_with("invalid WebAssembly"));
    }

    /// The entry points of `domos_abi::ENTRY_POINTS` are held to their types, optional ones too.
    #[test]
    fn entry_points_have_the_types_of_the_abi() {
        let interrupt = module_with_heap(SHARED, r#"(func (export "domos_interrupt") (param i32 i32))"#);
        assert!(verify(&interrupt, HeapKind::Shared).is_ok());
        let wrong = module_with_heap(SHARED, r#"(func (export "domos_interrupt") (param i32))"#);
        assert_eq!(verify(&wrong, HeapKind::Shared).unwrap_err(), "exports domos_interrupt with the wrong type");
        let main = module_with_heap(SHARED, r#"(func (export "domos_main") (result i32) i32.const 0)"#);
        assert!(verify(&main, HeapKind::Shared).unwrap().function_exports.contains("domos_main"));
        let per_component = module_with_heap(SHARED, r#"(func (export "domos_main:c") (param i32))"#);
        assert_eq!(verify(&per_component, HeapKind::Shared).unwrap_err(), "exports domos_main:c with the wrong type");
        let other = module_with_heap(SHARED, r#"(func (export "domos_mainline") (param i64))"#);
        assert!(verify(&other, HeapKind::Shared).is_ok(), "not an entry point: an export of another name");
        let no_release = wat::parse_str(
            r#"(module (import "env" "memory" (memory 1 65536 shared))
               (global (export "__stack_pointer") (mut i32) (i32.const 0))
               (func (export "domos_init") (result i32) i32.const 0)
               (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
               (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
               (@custom "domos:manifest" "name = \"t\"\nversion = \"1\""))"#,
        )
        .unwrap();
        assert_eq!(refusal(&no_release), "does not export the entry point domos_release");
    }
}
