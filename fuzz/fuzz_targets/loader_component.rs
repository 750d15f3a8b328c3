//! `ComponentRegistry::add` and `add_pair`: a wasm module (or both builds of one component)
//! through validation, the verifier, the manifest, the bounded check of the exports the manifest
//! lists and the stack guard — everything the kernel decides about a module before it translates
//! it.
//!
//! Input: a module; or, when a second wasm header (`\0asm`, version 1) follows the first, the
//! threaded build up to it and the single-threaded build from it, given to `add_pair`.
//!
//! Checks, beyond no panic, for an accepted component:
//! * the registry holds it under its manifest name; the manifest, host calls, kind and `main` are
//!   what the verifier and the manifest parser say of the module;
//! * the code the kernel will translate (`code()`, each build with its stack guard) verifies
//!   again as code (`verify_code`: with the guard's `__stack_limit`), with the same host calls,
//!   kind, `main` and manifest; the single build exists exactly when one was given, and Pulley is
//!   refused without it;
//! * the module exports a mutable `i32` `__stack_pointer` and the code an `__stack_limit`, the
//!   globals the kernel sets for every thread (`set_stack`), and the stack guard did its work:
//!   every `global.set` of the stack pointer is preceded by the check against `__stack_limit`,
//!   whose failure calls a function that only traps;
//! * every `memory.copy` of the module is one in the code still, reached only for a copy no
//!   longer than a piece, and a call of one added function (`domos_memory_copy`) for the others;
//! * every bounded export the manifest names has a bound, in the manifest's order;
//! * no host call is ungranted once every grant is given, and an ungranted call is one the
//!   component imports and that needs a grant.
#![no_main]

use std::sync::Arc;

use domos_abi::{Grant, HostCall};
use domos_loader::codegen::Translator;
use domos_loader::instrument::{COPY_FUNCTION, COPY_PIECE, LIMIT_GLOBAL, OVERFLOW_FUNCTION};
use domos_loader::manifest::Manifest;
use domos_loader::verifier::{self, HeapKind, Verified};
use domos_loader::{Component, ComponentRegistry};
use libfuzzer_sys::fuzz_target;
use wasmparser::{BlockType, ExternalKind, Operator, Parser, Payload, TypeRef, ValType};

const MAGIC: &[u8] = b"\0asm\x01\0\0\0";

/// What the stack guard needs to be checked: the module's shadow stack pointer (a mutable `i32`
/// global exported as `__stack_pointer`), its limit global, and its functions' bodies.
struct Survey {
    stack_pointer: Option<u32>,
    limits: Vec<u32>,
    /// Function index and type index of each defined function.
    functions: Vec<(u32, u32)>,
    void_types: Vec<u32>,
    /// Each defined function's operators, in order.
    bodies: Vec<Vec<Op>>,
    limit_is_fresh_i32: bool,
}

/// The operators the check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    GlobalSet(u32),
    GlobalGet(u32),
    LocalTee(u32),
    LocalGet(u32),
    I32LtU,
    I32GtU,
    I32Const(i32),
    IfEmpty,
    IfType(u32),
    Else,
    Call(u32),
    End,
    Unreachable,
    MemoryCopy,
    Other,
}

impl Op {
    fn of(op: &Operator<'_>) -> Op {
        match *op {
            Operator::GlobalSet { global_index } => Op::GlobalSet(global_index),
            Operator::GlobalGet { global_index } => Op::GlobalGet(global_index),
            Operator::LocalTee { local_index } => Op::LocalTee(local_index),
            Operator::LocalGet { local_index } => Op::LocalGet(local_index),
            Operator::I32LtU => Op::I32LtU,
            Operator::I32GtU => Op::I32GtU,
            Operator::I32Const { value } => Op::I32Const(value),
            Operator::If { blockty: BlockType::Empty } => Op::IfEmpty,
            Operator::If { blockty: BlockType::FuncType(ty) } => Op::IfType(ty),
            Operator::Else => Op::Else,
            Operator::Call { function_index } => Op::Call(function_index),
            Operator::End => Op::End,
            Operator::Unreachable => Op::Unreachable,
            Operator::MemoryCopy { .. } => Op::MemoryCopy,
            _ => Op::Other,
        }
    }
}

fn survey(bytes: &[u8]) -> Survey {
    let mut types = Vec::new();
    let mut globals: Vec<(bool, bool)> = Vec::new(); // (mutable i32, initialised to 0)
    let mut imported_functions = 0u32;
    let mut function_types = Vec::new();
    let mut exports = Vec::new();
    let mut bodies = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.expect("the verifier accepted the module") {
            Payload::TypeSection(reader) => {
                for ty in reader.into_iter_err_on_gc_types() {
                    let ty = ty.expect("function types");
                    types.push(ty.params().is_empty() && ty.results().is_empty());
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    match import.expect("import").ty {
                        TypeRef::Func(_) => imported_functions += 1,
                        TypeRef::Global(g) => globals.push((g.mutable && g.content_type == ValType::I32, false)),
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                function_types = reader.into_iter().map(|t| t.expect("function")).collect();
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    let global = global.expect("global");
                    let mut init = global.init_expr.get_operators_reader();
                    let zero = matches!(init.read(), Ok(Operator::I32Const { value: 0 }));
                    globals.push((global.ty.mutable && global.ty.content_type == ValType::I32, zero));
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.expect("export");
                    exports.push((export.name.to_string(), export.kind, export.index));
                }
            }
            Payload::CodeSectionEntry(body) => {
                let operators = body.get_operators_reader().expect("operators");
                bodies.push(operators.into_iter().map(|op| Op::of(&op.expect("operator"))).collect());
            }
            _ => {}
        }
    }
    let global = |name: &str| -> Vec<u32> {
        exports.iter().filter(|(n, kind, _)| n == name && *kind == ExternalKind::Global).map(|(_, _, i)| *i).collect()
    };
    let stack_pointer =
        global("__stack_pointer").first().copied().filter(|&g| globals.get(g as usize).is_some_and(|(m, _)| *m));
    let limits = global(LIMIT_GLOBAL);
    let limit_is_fresh_i32 = limits.first().is_some_and(|&g| globals.get(g as usize) == Some(&(true, true)));
    Survey {
        stack_pointer,
        limits,
        functions: function_types.iter().enumerate().map(|(i, &t)| (imported_functions + i as u32, t)).collect(),
        void_types: types.iter().enumerate().filter(|(_, void)| **void).map(|(i, _)| i as u32).collect(),
        bodies,
        limit_is_fresh_i32,
    }
}

fn sets_of(survey: &Survey, global: u32) -> usize {
    survey.bodies.iter().flatten().filter(|op| **op == Op::GlobalSet(global)).count()
}

/// Checks that `code` is `module` with its shadow stack guarded.
fn check_stack_guard(module: &[u8], code: &[u8]) {
    let before = survey(module);
    // The kernel sets both globals for every thread it starts.
    let stack_pointer = before.stack_pointer.expect("an accepted module exports a mutable i32 __stack_pointer");
    let after = survey(code);
    assert_eq!(after.stack_pointer, Some(stack_pointer), "the stack pointer keeps its index");
    assert_eq!(after.limits.len(), 1, "one {LIMIT_GLOBAL} export");
    let limit = after.limits[0];
    assert!(after.limit_is_fresh_i32, "{LIMIT_GLOBAL} is a mutable i32 starting at 0");
    assert_eq!(sets_of(&before, stack_pointer), sets_of(&after, stack_pointer), "every stack pointer move is kept");
    let mut overflow = None;
    for body in &after.bodies {
        for (i, op) in body.iter().enumerate() {
            if *op != Op::GlobalSet(stack_pointer) {
                continue;
            }
            let window = &body[i.saturating_sub(7)..i];
            let [
                Op::LocalTee(tee),
                Op::GlobalGet(checked),
                Op::I32LtU,
                Op::IfEmpty,
                Op::Call(called),
                Op::End,
                Op::LocalGet(get),
            ] = window
            else {
                panic!("an unchecked global.set of the stack pointer: {window:?}");
            };
            assert_eq!((tee, checked), (get, &limit), "the checked value is the one set, against the limit");
            assert_eq!(*overflow.get_or_insert(*called), *called, "one {OVERFLOW_FUNCTION}");
        }
    }
    if let Some(overflow) = overflow {
        let defined = after.functions.iter().position(|(index, _)| *index == overflow).expect("a defined function");
        assert!(after.void_types.contains(&after.functions[defined].1), "{OVERFLOW_FUNCTION} is () -> ()");
        assert!(
            after.bodies[defined] == [Op::Unreachable, Op::End],
            "{OVERFLOW_FUNCTION} only traps: {:?}",
            after.bodies[defined]
        );
    }
}

/// Checks that every `memory.copy` of `module` is made as the instruction in `code` only when it
/// is at most a piece long, and by the copy function otherwise.
fn check_copies(module: &[u8], code: &[u8]) {
    let (before, after) = (survey(module), survey(code));
    let copies = |body: &[Op]| body.iter().filter(|op| **op == Op::MemoryCopy).count();
    let added = &after.bodies[before.bodies.len()..];
    let copiers: Vec<usize> = (0..added.len()).filter(|&i| copies(&added[i]) > 0).collect();
    let [copier] = copiers[..] else {
        panic!("{} added functions copy memory, not {COPY_FUNCTION} alone", copiers.len());
    };
    let copy = after.functions[before.bodies.len() + copier].0;
    let piece = COPY_PIECE as i32;
    let mut sites = 0;
    for body in &after.bodies[..before.bodies.len()] {
        for (i, op) in body.iter().enumerate() {
            if *op != Op::MemoryCopy {
                continue;
            }
            let window = &body[i.saturating_sub(7)..i];
            let [
                Op::LocalTee(tee),
                Op::LocalGet(get),
                Op::I32Const(limit),
                Op::I32GtU,
                Op::IfType(_),
                Op::Call(called),
                Op::Else,
            ] = window
            else {
                panic!("a memory.copy made whatever its length: {window:?}");
            };
            assert_eq!((tee, *limit, *called), (get, piece, copy), "a copy longer than a piece calls {COPY_FUNCTION}");
            sites += 1;
        }
    }
    assert_eq!(sites, before.bodies.iter().map(|b| copies(b)).sum::<usize>(), "every copy is kept");
}

/// Checks that `code`, what the kernel translates of a build, still verifies and is the same
/// component.
fn check_code(build: &[u8], code: &[u8], heap: HeapKind, original: &Verified) {
    let again =
        verifier::verify_code(code, heap).unwrap_or_else(|e| panic!("the code to translate does not verify: {e}"));
    assert_eq!(again.host_calls, original.host_calls);
    assert_eq!(again.manifests, original.manifests);
    assert_eq!(again.function_exports, original.function_exports, "the guard adds a global export, no function");
    assert_eq!(again.kind, original.kind);
    check_stack_guard(build, code);
    check_copies(build, code);
}

fn check(registry: &ComponentRegistry, component: &Arc<Component>, threaded: &[u8], single: Option<&[u8]>) {
    let registered = registry.get(&component.manifest.name).expect("registered under its manifest name");
    assert!(Arc::ptr_eq(registered, component));
    let original = verifier::verify(threaded, HeapKind::Shared).expect("an accepted module verifies");
    assert_eq!(original.manifests.len(), 1, "a component file holds one component");
    assert_eq!(Manifest::parse(&original.manifests[0].text).as_ref(), Ok(&component.manifest));
    assert_eq!(component.host_calls(), original.host_calls.iter().cloned().collect::<Vec<_>>());
    let main = component.entries.main.as_ref();
    assert_eq!(main.is_some_and(|m| original.function_exports.contains(m)), component.has_main());
    assert_eq!(component.kind, original.kind);
    check_code(
        threaded,
        component.code_for(Translator::Cranelift).expect("a threaded build"),
        HeapKind::Shared,
        &original,
    );
    match single {
        Some(single) => {
            assert!(component.has_single_build());
            let verified = verifier::verify(single, HeapKind::Single).expect("an accepted single build verifies");
            assert_eq!(Manifest::parse(&verified.manifests[0].text).as_ref(), Ok(&component.manifest));
            assert!(verified.host_calls.is_subset(&original.host_calls));
            let code = component.code_for(Translator::Pulley).expect("a single build");
            check_code(single, code, HeapKind::Single, &verified);
        }
        None => {
            assert!(!component.has_single_build());
            assert!(component.code_for(Translator::Pulley).is_err());
        }
    }
    let bounded: Vec<&String> = component.bounded.iter().map(|(name, _)| name).collect();
    assert_eq!(bounded, component.manifest.bounded.iter().collect::<Vec<_>>());
    assert!(component.ungranted_calls(&Grant::ALL).is_empty());
    for call in component.ungranted_calls(&[]) {
        assert!(component.host_calls().iter().any(|c| c == call));
        assert_ne!(HostCall::named(call).expect("a host call").grant, Grant::Basic);
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte is tested alone so that a `bcmp` (intercepted and traced by the sanitizer)
    // runs only where a header can start, not at every byte of a 100 KB module.
    let split = data.windows(MAGIC.len()).skip(1).position(|w| w[0] == 0 && w == MAGIC).map(|at| at + 1);
    let (threaded, single) = match split {
        Some(at) => (&data[..at], Some(&data[at..])),
        None => (data, None),
    };
    let mut registry = ComponentRegistry::default();
    let added = match single {
        Some(single) => registry.add_pair("fuzz", threaded, single),
        None => registry.add("fuzz", threaded),
    };
    if let Ok(component) = added {
        check(&registry, &component, threaded, single);
    }
    // The same bytes as a collocated build: what it offers of a component the registry holds
    // says of itself what the component alone does.
    registry.add_collocated("fuzz", threaded);
    for name in registry.names().map(str::to_string).collect::<Vec<_>>() {
        if let Ok(Some(collocated)) = registry.collocated(&name) {
            let alone = registry.get(&name).expect("offered only beside a component alone");
            assert!(alone.manifest.differences(&collocated.manifest).is_empty());
            assert_eq!(collocated.kind, alone.kind);
        }
    }
});
