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
    let params: Vec<_> = call.params.iter().map(|(_, t)| t.wasm().name()).collect();
    let result = call.result.map_or(String::new(), |r| format!(" -> {}", r.wasm().name()));
    Err(format!("imports domos.{name} with the wrong type; the kernel declares ({}){result}", params.join(", ")))
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
                for ty in reader {
                    func_types.push(ty.map_err(|e| e.to_string())?);
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
        let mut reader = body.get_operators_reader().map_err(|e| e.to_string())?;
        while !reader.eof() {
            match reader.read().map_err(|e| e.to_string())? {
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
    let signatures: Vec<(&str, Vec<ValType>, Vec<ValType>, bool)> = match kind {
        Kind::Ordinary => ENTRY_POINTS
            .iter()
            .map(|e| {
                let params = e.params.iter().map(|(_, t)| val_type(*t)).collect();
                (e.name, params, e.result.map(val_type).into_iter().collect(), e.required)
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
        let Some((_, _, index)) = exported(name) else {
            if *required {
                return Err(format!("does not export the entry point {name}"));
            }
            continue;
        };
        match func_type(*index) {
            Some(t) if t.params() == params.as_slice() && t.results() == results.as_slice() => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A module that passes the verifier: `memory` is its heap import, `extra` more definitions.
    fn module(memory: &str, extra: &str) -> Vec<u8> {
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
        assert!(verify(&module(SHARED, ""), HeapKind::Shared).is_ok());
        assert!(verify(&module(UNSHARED, ""), HeapKind::Single).is_ok());
        let threaded = verify(&module(SHARED, ""), HeapKind::Single).unwrap_err();
        assert!(threaded.starts_with("is a threaded build"), "{threaded}");
        // With atomics in the code the validator refuses it first; the message is the same.
        let atomics = module(SHARED, "(func (result i32) (i32.atomic.load (i32.const 0)))");
        assert_eq!(verify(&atomics, HeapKind::Single).unwrap_err(), threaded);
        let single = verify(&module(UNSHARED, ""), HeapKind::Shared).unwrap_err();
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
        let interrupt = module(SHARED, r#"(func (export "domos_interrupt") (param i32 i32))"#);
        assert!(verify(&interrupt, HeapKind::Shared).is_ok());
        let wrong = module(SHARED, r#"(func (export "domos_interrupt") (param i32))"#);
        assert_eq!(verify(&wrong, HeapKind::Shared).unwrap_err(), "exports domos_interrupt with the wrong type");
        let main = module(SHARED, r#"(func (export "domos_main") (result i32) i32.const 0)"#);
        assert!(verify(&main, HeapKind::Shared).unwrap().has_main);
        let no_release = wat::parse_str(
            r#"(module (import "env" "memory" (memory 1 1 shared))
               (global (export "__stack_pointer") (mut i32) (i32.const 0))
               (func (export "domos_init") (result i32) i32.const 0)
               (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
               (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0))"#,
        )
        .unwrap();
        assert_eq!(verify(&no_release, HeapKind::Shared).unwrap_err(), "does not export the entry point domos_release");
    }
}
