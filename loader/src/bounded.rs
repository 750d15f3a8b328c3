//! Verified bounded handlers: a check that an exported function finishes within a number of
//! wasm instructions the verifier computes, for code that must not hold a CPU for long (a
//! scheduler's `preempted`, an interrupt handler).
//!
//! A function passes when its body is made of:
//! * straight-line code, `block`, `if`/`else` (the longer arm counts), forward `br`, `br_if` and
//!   `br_table` to enclosing blocks, `return` and `unreachable`;
//! * counted loops: the only branch back to a `loop` is one `br_if` that ends its body, right
//!   after the counter local is stepped by a constant and compared with a constant limit, and the
//!   counter is written nowhere else in the body (see [`Counted`] for the accepted forms);
//! * `call`s (and `return_call`s) of functions that pass the same check; a cycle of calls is
//!   recursion and fails;
//! * `memory.fill`, `memory.copy`, `memory.init` and the table versions only with a constant
//!   length, counted as one instruction per element.
//!
//! Host calls other than the host calls the table marks `bounded`, `call_indirect` and `memory.atomic.wait`
//! fail. The bound over-approximates: every
//! instruction of a block counts even when a branch skips it, an `if` costs its longer arm, a loop
//! costs its trip count times its body (nested loops multiply) and a call costs the callee's
//! bound. `end` and `else` cost nothing, every other operator one.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use wasmparser::{ExternalKind, FunctionBody, Operator, Parser, Payload, TypeRef, Validator};

/// Whether a bounded function may call import `name` (`module.name`): a host call the table marks
/// `bounded`, which never blocks and does work bounded by kernel limits (waking the threads of one
/// queue at most), so it counts as one instruction. An interrupt handler uses these to note the
/// time and wake the driver thread that waits.
fn may_call_bounded(name: &str) -> bool {
    name.strip_prefix(domos_abi::HOST_MODULE)
        .and_then(|n| n.strip_prefix('.'))
        .and_then(domos_abi::HostCall::named)
        .is_some_and(|call| call.bounded)
}

/// Bounds above this many instructions are treated as unbounded.
pub const MAX_BOUND: u64 = 1 << 40;

/// Calls nested deeper than this are refused, which also bounds the checker's own stack.
const MAX_CALL_DEPTH: usize = 256;

/// How many operators before a loop's closing `br_if` the counted-loop pattern may span.
const WINDOW: usize = 8;

/// Checks that `export`, a function exported by `module`, finishes in bounded time; returns the
/// worst-case number of wasm instructions it executes.
///
/// # Errors
/// Why it is not bounded, naming the export, the chain of functions from it to the offending one
/// (with names from the name section when present) and the offending loop, call or instruction
/// with its byte offset in the module.
pub fn check(module: &[u8], export: &str) -> Result<u64, String> {
    let bounds = check_all(module, &[export])?;
    bounds.first().map(|(_, bound)| *bound).ok_or_else(|| format!("{export}: not checked"))
}

/// Checks every export in `exports` as [`check`] does, parsing the module once; returns each
/// export with its bound, in the order given.
///
/// # Errors
/// As for [`check`], for the first export that fails.
pub fn check_all<S: AsRef<str>>(module: &[u8], exports: &[S]) -> Result<Vec<(String, u64)>, String> {
    if exports.is_empty() {
        return Ok(Vec::new());
    }
    Validator::new_with_features(crate::verifier::features())
        .validate_all(module)
        .map_err(|e| format!("invalid WebAssembly: {e}"))?;
    check_all_valid(module, exports)
}

/// [`check_all`] of a module the verifier has accepted (`verifier::verify`, which validates it
/// with [`crate::verifier::features`] or fewer), without validating it again: validation is most
/// of the time a component takes to load.
///
/// # Errors
/// As for [`check_all`].
pub(crate) fn check_all_valid<S: AsRef<str>>(module: &[u8], exports: &[S]) -> Result<Vec<(String, u64)>, String> {
    if exports.is_empty() {
        return Ok(Vec::new());
    }
    let module = Module::parse(module)?;
    let mut checker = Checker { module: &module, memo: HashMap::new(), depth: 0 };
    let mut bounds = Vec::new();
    for export in exports {
        let export = export.as_ref();
        let index = module
            .exports
            .iter()
            .find(|(name, _)| name == export)
            .map(|(_, index)| *index)
            .ok_or_else(|| format!("{export}: the module exports no function of that name"))?;
        let bound = checker.function(index).map_err(|failure| failure.describe(export, &module))?;
        bounds.push((export.to_string(), bound));
    }
    Ok(bounds)
}

/// What the check needs from a module.
struct Module<'a> {
    /// Imported functions (host calls), as `module.name`, in index order.
    imports: Vec<String>,
    /// Bodies of the defined functions; function `imports.len() + i` is `bodies[i]`.
    bodies: Vec<FunctionBody<'a>>,
    /// Function names from the name section.
    names: HashMap<u32, String>,
    /// Exported functions.
    exports: Vec<(String, u32)>,
}

impl<'a> Module<'a> {
    /// Reads a module that has been validated.
    fn parse(bytes: &'a [u8]) -> Result<Module<'a>, String> {
        let mut module = Module { imports: Vec::new(), bodies: Vec::new(), names: HashMap::new(), exports: Vec::new() };
        for payload in Parser::new(0).parse_all(bytes) {
            match payload.map_err(|e| format!("invalid WebAssembly: {e}"))? {
                Payload::ImportSection(reader) => {
                    for import in reader.into_imports() {
                        let import = import.map_err(|e| e.to_string())?;
                        if let TypeRef::Func(_) = import.ty {
                            module.imports.push(format!("{}.{}", import.module, import.name));
                        }
                    }
                }
                Payload::ExportSection(reader) => {
                    for export in reader {
                        let export = export.map_err(|e| e.to_string())?;
                        if export.kind == ExternalKind::Func {
                            module.exports.push((export.name.to_string(), export.index));
                        }
                    }
                }
                Payload::CodeSectionEntry(body) => module.bodies.push(body),
                Payload::CustomSection(section) => {
                    if let wasmparser::KnownCustom::Name(names) = section.as_known() {
                        for name in names.into_iter().flatten() {
                            if let wasmparser::Name::Function(map) = name {
                                for naming in map.into_iter().flatten() {
                                    module.names.insert(naming.index, naming.name.to_string());
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(module)
    }

    /// `function N (name)`, or `function N` without a name.
    fn describe(&self, index: u32) -> String {
        match self.names.get(&index) {
            Some(name) => format!("function {index} ({name})"),
            None => format!("function {index}"),
        }
    }
}

/// Why a function is not bounded: the calls leading to the offending function, and the problem.
struct Failure {
    /// The offending function first, then each caller with the offset of its call, innermost first.
    path: Vec<(u32, Option<usize>)>,
    /// The offending construct and why.
    problem: String,
    /// Whether `problem` is about the function as a callee (`…, which is recursive`) rather
    /// than about something in its body (`…: loop at offset …`).
    as_callee: bool,
}

impl Failure {
    fn new(function: u32, problem: String) -> Failure {
        Failure { path: vec![(function, None)], problem, as_callee: false }
    }

    fn callee(function: u32, problem: String) -> Failure {
        Failure { path: vec![(function, None)], problem, as_callee: true }
    }

    /// `export: function 7 (a) calls function 5 (b) at offset 0x2c0: loop at offset …`.
    fn describe(&self, export: &str, module: &Module<'_>) -> String {
        let mut text = format!("{export}: ");
        let mut call_offset = None;
        for (function, offset) in self.path.iter().rev() {
            if let Some(at) = call_offset {
                let _ = write!(text, " calls {} at offset {at:#x}", module.describe(*function));
            } else {
                text.push_str(&module.describe(*function));
            }
            call_offset = *offset;
        }
        text.push_str(if self.as_callee { ", which " } else { ": " });
        text.push_str(&self.problem);
        text
    }
}

enum Memo {
    InProgress,
    Done(u64),
}

struct Checker<'m, 'a> {
    module: &'m Module<'a>,
    memo: HashMap<u32, Memo>,
    depth: usize,
}

/// A counted loop's closing `br_if`, as recognised at the end of its body.
///
/// The accepted forms, where `c` is an `i32` local, `s` and `L` constants (`s` ≠ 0), and the
/// comparison is of the stepped value with `L`:
/// ```text
/// local.get c  i32.const s  i32.add|i32.sub     (or i32.const s  local.get c  i32.add)
/// local.tee c                                   (or local.set c  local.get c)
/// i32.const L  i32.lt_u|lt_s|le_u|le_s|gt_u|gt_s|ge_u|ge_s|ne   (or nothing: "≠ 0")
/// br_if 0                                       (the loop; then its `end`)
/// ```
/// `lt`/`le` need a counter that counts up (a step below 2^31), `gt`/`ge` one that counts down,
/// and both a limit the counter reaches without wrapping around; their trip count is exact when
/// the initial value is known and at most ⌈L/s⌉ + 1 otherwise. `ne` needs the initial value;
/// its trip count is the least n ≥ 1 with k + n·s = L (mod 2^32).
///
/// The initial value k is known when `i32.const k  local.set|local.tee c` precedes the `loop` on
/// every path to it: the fact is forgotten at any other write to `c`, at `else`, at the `end` of
/// an `if` and of a block that some branch targets, and inside loops (entering a block, or
/// leaving a loop or an untargeted block, keeps it).
#[derive(Debug, Clone, Copy)]
struct Counted {
    counter: u32,
    /// The step, as added to the counter modulo 2^32.
    delta: u32,
    comparison: Comparison,
    limit: u32,
    /// Where the step is written back to the counter.
    write_offset: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    LtU,
    LtS,
    LeU,
    LeS,
    GtU,
    GtS,
    GeU,
    GeS,
    Ne,
}

struct LoopFrame {
    offset: usize,
    /// Locals known to hold a constant when the loop is entered.
    known_on_entry: Vec<(u32, i32)>,
    /// Where this loop's body starts in the function's log of local writes.
    writes_start: usize,
    counted: Option<Counted>,
}

enum Kind {
    Function,
    Block,
    If,
    Else { then_cost: u64 },
    Loop(Box<LoopFrame>),
}

struct Frame {
    kind: Kind,
    /// The instructions counted in this construct so far (for `Else`, in the else arm).
    cost: u64,
    /// Whether some branch targets this frame's label.
    targeted: bool,
}

impl Checker<'_, '_> {
    /// The bound of function `index`, checking it (and its callees) on first use.
    fn function(&mut self, index: u32) -> Result<u64, Failure> {
        match self.memo.get(&index) {
            Some(Memo::Done(bound)) => return Ok(*bound),
            Some(Memo::InProgress) => {
                return Err(Failure::callee(index, "is recursive".into()));
            }
            None => {}
        }
        let imported = self.module.imports.len();
        if self.module.imports.get(index as usize).is_some_and(|name| may_call_bounded(name)) {
            return Ok(1);
        }
        let Some(body) = (index as usize).checked_sub(imported).and_then(|i| self.module.bodies.get(i)) else {
            let problem = match self.module.imports.get(index as usize) {
                Some(name) => format!("is the host call {name}, whose time the verifier cannot bound"),
                None => "does not exist".to_string(),
            };
            return Err(Failure::callee(index, problem));
        };
        if self.depth >= MAX_CALL_DEPTH {
            return Err(Failure::callee(index, format!("is more than {MAX_CALL_DEPTH} calls deep")));
        }
        self.memo.insert(index, Memo::InProgress);
        self.depth += 1;
        let bound = self.body(index, body);
        self.depth -= 1;
        let bound = bound?;
        self.memo.insert(index, Memo::Done(bound));
        Ok(bound)
    }

    /// The bound of one function body.
    fn body(&mut self, index: u32, body: &FunctionBody<'_>) -> Result<u64, Failure> {
        let fail = |problem: String| Failure::new(index, problem);
        let mut reader = body.get_operators_reader().map_err(|e| fail(e.to_string()))?;
        let mut stack = vec![Frame { kind: Kind::Function, cost: 0, targeted: false }];
        let mut window: VecDeque<(Operator<'_>, usize)> = VecDeque::with_capacity(WINDOW);
        let mut known: Vec<(u32, i32)> = Vec::new();
        let mut writes: Vec<(u32, usize)> = Vec::new();
        // The offset of a loop's closing `br_if` just read: the next operator must be its `end`.
        let mut closing: Option<usize> = None;
        while !reader.eof() {
            let (op, offset) = reader.read_with_offset().map_err(|e| fail(e.to_string()))?;
            if let Some(at) = closing.take()
                && !matches!(op, Operator::End)
            {
                let loop_offset = innermost_loop(&stack).unwrap_or(at);
                return Err(fail(format!(
                    "loop at offset {loop_offset:#x} is not a counted loop (the br_if at offset {at:#x} that repeats it is not the last instruction of its body)"
                )));
            }
            let top = stack.len() - 1;
            match op {
                Operator::Block { .. } | Operator::If { .. } => {
                    stack[top].cost = stack[top].cost.saturating_add(1);
                    let kind = if matches!(op, Operator::Block { .. }) { Kind::Block } else { Kind::If };
                    stack.push(Frame { kind, cost: 0, targeted: false });
                    window.clear();
                }
                Operator::Loop { .. } => {
                    stack[top].cost = stack[top].cost.saturating_add(1);
                    let frame = LoopFrame {
                        offset,
                        known_on_entry: std::mem::take(&mut known),
                        writes_start: writes.len(),
                        counted: None,
                    };
                    stack.push(Frame { kind: Kind::Loop(Box::new(frame)), cost: 0, targeted: false });
                    window.clear();
                }
                Operator::Else => {
                    let frame = &mut stack[top];
                    if let Kind::If = frame.kind {
                        frame.kind = Kind::Else { then_cost: frame.cost };
                        frame.cost = 0;
                    }
                    known.clear();
                    window.clear();
                }
                Operator::End => {
                    window.clear();
                    let Some(frame) = stack.pop() else {
                        return Err(fail(format!("unbalanced end at offset {offset:#x}")));
                    };
                    let cost = match frame.kind {
                        Kind::Function => return within_cap(frame.cost).map_err(fail),
                        Kind::Block => {
                            if frame.targeted {
                                known.clear();
                            }
                            frame.cost
                        }
                        Kind::If => {
                            known.clear();
                            frame.cost
                        }
                        Kind::Else { then_cost } => {
                            known.clear();
                            then_cost.max(frame.cost)
                        }
                        Kind::Loop(lp) => {
                            let trips = trip_count(&lp, &writes).map_err(|why| {
                                fail(format!("loop at offset {:#x} is not a counted loop ({why})", lp.offset))
                            })?;
                            let cost = trips.saturating_mul(frame.cost);
                            within_cap(cost).map_err(|why| fail(format!("loop at offset {:#x}: {why}", lp.offset)))?
                        }
                    };
                    let Some(parent) = stack.last_mut() else {
                        return Err(fail(format!("unbalanced end at offset {offset:#x}")));
                    };
                    parent.cost = parent.cost.saturating_add(cost);
                }
                Operator::Br { relative_depth } | Operator::BrIf { relative_depth } => {
                    stack[top].cost = stack[top].cost.saturating_add(1);
                    let target =
                        target(&stack, relative_depth).ok_or_else(|| fail(format!("bad branch at {offset:#x}")))?;
                    stack[target].targeted = true;
                    if let Kind::Loop(lp) = &mut stack[target].kind {
                        let why = if matches!(op, Operator::Br { .. }) {
                            Some(format!("a br at offset {offset:#x} jumps back to its start unconditionally"))
                        } else if target != top {
                            Some(format!("a br_if at offset {offset:#x} inside a nested block jumps back to its start"))
                        } else if lp.counted.is_some() {
                            Some(format!("a second br_if at offset {offset:#x} jumps back to its start"))
                        } else {
                            match counted_pattern(&window) {
                                Some(counted) => {
                                    lp.counted = Some(counted);
                                    closing = Some(offset);
                                    None
                                }
                                None => Some(format!(
                                    "the br_if at offset {offset:#x} that repeats it does not follow a constant step and comparison of a counter local"
                                )),
                            }
                        };
                        if let Some(why) = why {
                            return Err(fail(format!("loop at offset {:#x} is not a counted loop ({why})", lp.offset)));
                        }
                    }
                    window.clear();
                }
                Operator::BrTable { ref targets } => {
                    stack[top].cost = stack[top].cost.saturating_add(1);
                    let mut depths = vec![targets.default()];
                    for depth in targets.targets() {
                        depths.push(depth.map_err(|e| fail(e.to_string()))?);
                    }
                    for depth in depths {
                        let target = target(&stack, depth).ok_or_else(|| fail(format!("bad branch at {offset:#x}")))?;
                        stack[target].targeted = true;
                        if let Kind::Loop(lp) = &stack[target].kind {
                            return Err(fail(format!(
                                "loop at offset {:#x} is not a counted loop (a br_table at offset {offset:#x} jumps back to its start)",
                                lp.offset
                            )));
                        }
                    }
                    window.clear();
                }
                Operator::Call { function_index } | Operator::ReturnCall { function_index } => {
                    let callee = self.function(function_index).map_err(|mut failure| {
                        failure.path.push((index, Some(offset)));
                        failure
                    })?;
                    stack[top].cost = stack[top].cost.saturating_add(1).saturating_add(callee);
                    window.push_back((op, offset));
                }
                Operator::CallIndirect { .. }
                | Operator::ReturnCallIndirect { .. }
                | Operator::CallRef { .. }
                | Operator::ReturnCallRef { .. } => {
                    return Err(fail(format!(
                        "makes an indirect call at offset {offset:#x}, whose callee the verifier cannot know"
                    )));
                }
                Operator::MemoryAtomicWait32 { .. } | Operator::MemoryAtomicWait64 { .. } => {
                    return Err(fail(format!("executes memory.atomic.wait at offset {offset:#x}, which may block")));
                }
                Operator::MemoryFill { .. }
                | Operator::MemoryCopy { .. }
                | Operator::MemoryInit { .. }
                | Operator::TableFill { .. }
                | Operator::TableCopy { .. }
                | Operator::TableInit { .. } => {
                    let Some((Operator::I32Const { value }, _)) = window.back() else {
                        return Err(fail(format!(
                            "executes a bulk memory or table operation at offset {offset:#x} whose length is not a constant"
                        )));
                    };
                    let elements = u64::from(*value as u32);
                    stack[top].cost = stack[top].cost.saturating_add(1).saturating_add(elements);
                    window.push_back((op, offset));
                }
                Operator::LocalSet { local_index } | Operator::LocalTee { local_index } => {
                    stack[top].cost = stack[top].cost.saturating_add(1);
                    writes.push((local_index, offset));
                    known.retain(|(local, _)| *local != local_index);
                    if let Some((Operator::I32Const { value }, _)) = window.back() {
                        known.push((local_index, *value));
                    }
                    window.push_back((op, offset));
                }
                Operator::TryTable { .. }
                | Operator::Try { .. }
                | Operator::Catch { .. }
                | Operator::CatchAll
                | Operator::Delegate { .. }
                | Operator::Throw { .. }
                | Operator::ThrowRef
                | Operator::Rethrow { .. } => {
                    return Err(fail(format!("uses exceptions at offset {offset:#x}, which Domos does not support")));
                }
                _ => {
                    stack[top].cost = stack[top].cost.saturating_add(1);
                    window.push_back((op, offset));
                }
            }
            if window.len() > WINDOW {
                window.pop_front();
            }
        }
        Err(fail("ends without closing its body".into()))
    }
}

/// The stack index of the frame a branch of `relative_depth` targets.
fn target(stack: &[Frame], relative_depth: u32) -> Option<usize> {
    (stack.len() - 1).checked_sub(usize::try_from(relative_depth).ok()?)
}

fn innermost_loop(stack: &[Frame]) -> Option<usize> {
    stack.iter().rev().find_map(|f| if let Kind::Loop(lp) = &f.kind { Some(lp.offset) } else { None })
}

fn within_cap(bound: u64) -> Result<u64, String> {
    if bound > MAX_BOUND {
        Err("its bound exceeds 2^40 instructions, which counts as unbounded".to_string())
    } else {
        Ok(bound)
    }
}

/// Recognises the step, write-back and comparison that end a counted loop's body (the operators
/// in `window`, the last one just before the `br_if`).
fn counted_pattern(window: &VecDeque<(Operator<'_>, usize)>) -> Option<Counted> {
    let ops: Vec<&Operator<'_>> = window.iter().map(|(op, _)| op).collect();
    let mut end = ops.len();
    // The comparison, or none for `br_if` on the counter itself (continue while ≠ 0).
    let comparison = match ops.get(end.checked_sub(1)?)? {
        Operator::I32LtU => Some(Comparison::LtU),
        Operator::I32LtS => Some(Comparison::LtS),
        Operator::I32LeU => Some(Comparison::LeU),
        Operator::I32LeS => Some(Comparison::LeS),
        Operator::I32GtU => Some(Comparison::GtU),
        Operator::I32GtS => Some(Comparison::GtS),
        Operator::I32GeU => Some(Comparison::GeU),
        Operator::I32GeS => Some(Comparison::GeS),
        Operator::I32Ne => Some(Comparison::Ne),
        _ => None,
    };
    let (comparison, limit) = match comparison {
        Some(comparison) => {
            let Operator::I32Const { value } = ops.get(end.checked_sub(2)?)? else { return None };
            end -= 2;
            (comparison, *value as u32)
        }
        None => (Comparison::Ne, 0),
    };
    // The write-back: `local.tee c`, or `local.set c; local.get c`.
    let (counter, write_at) = match ops.get(end.checked_sub(1)?)? {
        Operator::LocalTee { local_index } => {
            end -= 1;
            (*local_index, end)
        }
        Operator::LocalGet { local_index } => match ops.get(end.checked_sub(2)?)? {
            Operator::LocalSet { local_index: set } if set == local_index => {
                end -= 2;
                (*local_index, end)
            }
            _ => return None,
        },
        _ => return None,
    };
    // The step: `local.get c; i32.const s; i32.add|i32.sub` or `i32.const s; local.get c; i32.add`.
    let step = ops.get(end.checked_sub(3)?..end)?;
    let delta = match step {
        [Operator::LocalGet { local_index }, Operator::I32Const { value }, Operator::I32Add]
        | [Operator::I32Const { value }, Operator::LocalGet { local_index }, Operator::I32Add]
            if *local_index == counter =>
        {
            *value as u32
        }
        [Operator::LocalGet { local_index }, Operator::I32Const { value }, Operator::I32Sub]
            if *local_index == counter =>
        {
            (*value as u32).wrapping_neg()
        }
        _ => return None,
    };
    if delta == 0 {
        return None;
    }
    let write_offset = window.get(write_at)?.1;
    Some(Counted { counter, delta, comparison, limit, write_offset })
}

/// How many times a loop's body runs: 1 without a back edge, else the counted trip count.
fn trip_count(lp: &LoopFrame, writes: &[(u32, usize)]) -> Result<u64, String> {
    let Some(counted) = lp.counted else { return Ok(1) };
    let body_writes = writes.get(lp.writes_start..).unwrap_or(&[]);
    if let Some((_, at)) =
        body_writes.iter().find(|(local, at)| *local == counted.counter && *at != counted.write_offset)
    {
        return Err(format!("its counter, local {}, is written in the body at offset {at:#x}", counted.counter));
    }
    let init = lp.known_on_entry.iter().find(|(local, _)| *local == counted.counter).map(|(_, value)| *value as u32);
    counted_trips(counted.delta, counted.comparison, counted.limit, init)
        .map_err(|why| format!("its counter, local {}, {why}", counted.counter))
}

/// The number of times a do-while loop runs whose counter starts at `init` (when known), is
/// stepped by `delta` (mod 2^32) and compared, stepped, with `limit`.
fn counted_trips(delta: u32, comparison: Comparison, limit: u32, init: Option<u32>) -> Result<u64, String> {
    const SIGN: u32 = 1 << 31;
    if comparison == Comparison::Ne {
        let init = init.ok_or("is compared with != but its initial value is not a constant set before the loop")?;
        // The least n ≥ 1 with init + n·delta ≡ limit (mod 2^32).
        let difference = limit.wrapping_sub(init);
        let shift = delta.trailing_zeros();
        if difference.trailing_zeros() < shift {
            return Err("never equals the limit".into());
        }
        let odd = delta >> shift;
        let mut inverse = odd; // Newton's iteration for the inverse of an odd number mod 2^32.
        for _ in 0..5 {
            inverse = inverse.wrapping_mul(2u32.wrapping_sub(odd.wrapping_mul(inverse)));
        }
        let modulus = 1u64 << (32 - shift);
        let n = (u64::from(difference >> shift) * u64::from(inverse)) % modulus;
        return Ok(if n == 0 { modulus } else { n });
    }
    // Map the counter to one that counts up by `step` and continues while below `bound`.
    let up = delta < SIGN;
    if delta == SIGN {
        return Err("is stepped by 2^31, which does not count in either direction".into());
    }
    let (flip, sign, inclusive) = match (comparison, up) {
        (Comparison::LtU, true) => (false, false, false),
        (Comparison::LeU, true) => (false, false, true),
        (Comparison::LtS, true) => (false, true, false),
        (Comparison::LeS, true) => (false, true, true),
        (Comparison::GtU, false) => (true, false, false),
        (Comparison::GeU, false) => (true, false, true),
        (Comparison::GtS, false) => (true, true, false),
        (Comparison::GeS, false) => (true, true, true),
        _ => {
            let direction = if up { "up" } else { "down" };
            return Err(format!("counts {direction}, away from the limit it is compared with"));
        }
    };
    let map = |value: u32| {
        let value = if sign { value ^ SIGN } else { value };
        if flip { !value } else { value }
    };
    let step = u64::from(if up { delta } else { delta.wrapping_neg() });
    let bound = u64::from(map(limit)) + u64::from(inclusive);
    if bound + step > 1 << 32 {
        return Err("could wrap around before reaching the limit".into());
    }
    // The value after the first trip; from below `bound` on, the counter cannot wrap.
    let first = init.map(|value| (u64::from(map(value)) + step) % (1 << 32));
    Ok(match first {
        Some(first) if first >= bound => 1,
        Some(first) => 1 + (bound - first).div_ceil(step),
        None => 1 + bound.div_ceil(step),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module whose exported function `f` has `body`, with `extra` definitions beside it.
    fn module(body: &str, extra: &str) -> Vec<u8> {
        wat::parse_str(format!(
            "(module {extra} (func $f (export \"f\") (param i32) (result i32) (local i32 i32) {body}))"
        ))
        .unwrap()
    }

    fn bound(body: &str, extra: &str) -> Result<u64, String> {
        check(&module(body, extra), "f")
    }

    /// `local.get c; i32.const step; i32.add; local.tee c; i32.const limit; cmp; br_if 0`.
    fn counted(step: i32, limit: i32, cmp: &str) -> String {
        format!("local.get 1 i32.const {step} i32.add local.tee 1 i32.const {limit} {cmp} br_if 0")
    }

    #[test]
    fn an_invalid_module_is_refused_before_it_is_checked() {
        // `check` validates what it is given; only the loader, after the verifier, skips that.
        let err = bound("i64.const 0", "").unwrap_err();
        assert!(err.starts_with("invalid WebAssembly: type mismatch"), "{err}");
    }

    #[test]
    fn straight_line_code_has_its_exact_length() {
        assert_eq!(bound("local.get 0 i32.const 2 i32.mul", ""), Ok(3));
        // An `if` costs its longer arm; `end` and `else` cost nothing.
        let body = "local.get 0 (if (result i32) (then i32.const 1) (else i32.const 2 i32.const 3 i32.add))";
        assert_eq!(bound(body, ""), Ok(2 + 3));
        // Forward branches out of blocks, `return` and `unreachable` are fine.
        let body = "block local.get 0 br_if 0 local.get 0 return end block br 0 end unreachable";
        assert_eq!(bound(body, ""), Ok(8));
    }

    #[test]
    fn a_counted_loop_costs_its_trips_times_its_body() {
        // Counter from 0 to 10 by 1, compared with <: 10 trips of 7 instructions.
        let body = format!("i32.const 0 local.set 1 loop {} end local.get 0", counted(1, 10, "i32.lt_u"));
        assert_eq!(bound(&body, ""), Ok(2 + 1 + 10 * 7 + 1));
        // Without a known initial value, < allows one trip more than the limit allows steps.
        let body = format!("loop {} end local.get 0", counted(1, 10, "i32.lt_u"));
        assert_eq!(bound(&body, ""), Ok(1 + 11 * 7 + 1));
        // rustc's rotated loop: step 4 to exactly 100 with !=, 25 trips.
        let body = format!("i32.const 0 local.set 1 loop {} end local.get 0", counted(4, 100, "i32.ne"));
        assert_eq!(bound(&body, ""), Ok(2 + 1 + 25 * 7 + 1));
        // rustc's count to zero: from -256 by 16 while the counter is not 0, 16 trips.
        let body =
            "i32.const -256 local.set 1 loop local.get 1 i32.const 16 i32.add local.tee 1 br_if 0 end local.get 0";
        assert_eq!(bound(body, ""), Ok(2 + 1 + 16 * 5 + 1));
        // Counting down with i32.sub and >, from 64 while above 0: 64 trips.
        let body = "i32.const 64 local.set 1 loop local.get 1 i32.const 1 i32.sub local.tee 1 i32.const 0 i32.gt_s br_if 0 end local.get 0";
        assert_eq!(bound(body, ""), Ok(2 + 1 + 64 * 7 + 1));
        // The initial value may be set before enclosing blocks, and the write-back may be a set and a get.
        let body = "i32.const 0 local.set 1 block loop local.get 1 i32.const 1 i32.add local.set 1 local.get 1 i32.const 3 i32.le_u br_if 0 end end local.get 0";
        assert_eq!(bound(body, ""), Ok(2 + 1 + 1 + 4 * 8 + 1));
    }

    #[test]
    fn nested_loops_multiply() {
        let inner =
            "i32.const 0 local.set 2 loop local.get 2 i32.const 1 i32.add local.tee 2 i32.const 5 i32.lt_u br_if 0 end";
        let body = format!("i32.const 0 local.set 1 loop {inner} {} end local.get 0", counted(1, 3, "i32.lt_u"));
        assert_eq!(bound(&body, ""), Ok(2 + 1 + 3 * (2 + 1 + 5 * 7 + 7) + 1));
    }

    #[test]
    fn a_loop_whose_counter_is_written_in_the_body_is_refused() {
        let body = format!(
            "i32.const 0 local.set 1 loop block i32.const 0 local.set 1 end {} end local.get 0",
            counted(1, 10, "i32.lt_u")
        );
        let error = bound(&body, "").unwrap_err();
        assert!(error.starts_with("f: function 0 (f): loop at offset 0x"), "{error}");
        assert!(
            error.contains("is not a counted loop (its counter, local 1, is written in the body at offset 0x"),
            "{error}"
        );
    }

    #[test]
    fn a_back_edge_from_the_middle_is_refused() {
        let body =
            format!("i32.const 0 local.set 1 loop local.get 0 br_if 0 {} end local.get 0", counted(1, 10, "i32.lt_u"));
        let error = bound(&body, "").unwrap_err();
        assert!(error.contains("does not follow a constant step and comparison of a counter local"), "{error}");
        let body = format!("i32.const 0 local.set 1 loop {} nop end local.get 0", counted(1, 10, "i32.lt_u"));
        assert!(bound(&body, "").unwrap_err().contains("is not the last instruction of its body"));
        let body = "loop br 0 end local.get 0";
        assert!(bound(body, "").unwrap_err().contains("jumps back to its start unconditionally"));
        let body = format!(
            "i32.const 0 local.set 1 loop block {} end end local.get 0",
            counted(1, 10, "i32.lt_u").replace("br_if 0", "br_if 1")
        );
        assert!(bound(&body, "").unwrap_err().contains("inside a nested block"));
        let body = "block loop local.get 0 br_table 0 1 end end local.get 0";
        assert!(bound(body, "").unwrap_err().contains("br_table"));
    }

    #[test]
    fn unsound_counted_forms_are_refused() {
        // A while loop on a value in memory.
        let body = "loop i32.const 0 i32.load i32.const 1 i32.sub local.tee 1 i32.const 0 i32.store local.get 1 br_if 0 end local.get 0";
        let error = bound(body, "(memory 1)").unwrap_err();
        assert!(error.contains("loop at offset") && error.contains("is not a counted loop"), "{error}");
        // A limit in a parameter.
        let body = "i32.const 0 local.set 1 loop local.get 1 i32.const 1 i32.add local.tee 1 local.get 0 i32.lt_u br_if 0 end local.get 0";
        assert!(bound(body, "").is_err());
        // != without a known initial value.
        let body = format!("loop {} end local.get 0", counted(1, 10, "i32.ne"));
        assert!(bound(&body, "").unwrap_err().contains("initial value is not a constant"));
        // The initial value is lost at a merge (the end of an if).
        let body = format!(
            "i32.const 0 local.set 1 local.get 0 (if (then i32.const 5 local.set 1)) loop {} end local.get 0",
            counted(1, 10, "i32.ne")
        );
        assert!(bound(&body, "").unwrap_err().contains("initial value is not a constant"));
        // != that is never reached, and counting away from the limit.
        let body = format!("i32.const 1 local.set 1 loop {} end local.get 0", counted(2, 10, "i32.ne"));
        assert!(bound(&body, "").unwrap_err().contains("never equals the limit"));
        let body = format!("i32.const 0 local.set 1 loop {} end local.get 0", counted(-1, 10, "i32.lt_u"));
        assert!(bound(&body, "").unwrap_err().contains("counts down, away from the limit"));
        // <= the largest value never stops; a limit the step can jump over may wrap around.
        let body = format!("loop {} end local.get 0", counted(1, -1, "i32.le_u"));
        assert!(bound(&body, "").unwrap_err().contains("wrap around"));
        let body = format!("loop {} end local.get 0", counted(16, -2, "i32.lt_u"));
        assert!(bound(&body, "").unwrap_err().contains("wrap around"));
        // A step of 0.
        let body = format!("i32.const 0 local.set 1 loop {} end local.get 0", counted(0, 10, "i32.ne"));
        assert!(bound(&body, "").is_err());
    }

    #[test]
    fn calls_add_the_callee_and_recursion_is_refused() {
        let extra = "(func $leaf (param i32) (result i32) local.get 0 i32.const 1 i32.add)
                     (func $middle (param i32) (result i32) local.get 0 call $leaf call $leaf)";
        assert_eq!(
            bound("local.get 0 call $middle call $leaf", extra),
            Ok(1 + (1 + (1 + (1 + 3) + (1 + 3))) + (1 + 3))
        );
        let extra = "(func $a (param i32) (result i32) local.get 0 call $b) (func $b (param i32) (result i32) local.get 0 call $a)";
        let error = bound("local.get 0 call $a", extra).unwrap_err();
        assert!(error.starts_with("f: function 2 (f) calls function 0 (a) at offset 0x"), "{error}");
        let tail = error.split(" calls ").skip(1).map(|step| step.split(" at offset ").next()).collect::<Vec<_>>();
        assert_eq!(tail, [Some("function 0 (a)"), Some("function 1 (b)"), Some("function 0 (a)")], "{error}");
        assert!(error.ends_with(", which is recursive"), "{error}");
        let error = bound("local.get 0 call $f", "").unwrap_err();
        assert!(error.contains("calls function 0 (f) at offset") && error.ends_with(", which is recursive"), "{error}");
    }

    #[test]
    fn host_calls_and_indirect_calls_are_refused() {
        let extra = r#"(import "domos" "yield_now" (func $yield))"#;
        let error = bound("call $yield local.get 0", extra).unwrap_err();
        assert!(error.contains("which is the host call domos.yield_now"), "{error}");
        let extra = r#"(import "domos" "atomic_set_and_unblock" (func $wake (param i32 i32 i32) (result i64)))"#;
        assert_eq!(
            bound("i32.const 1 i32.const 2 i32.const 1 call $wake drop local.get 0", extra),
            Ok(7),
            "a wake-up is allowed"
        );
        let extra = "(type $t (func (param i32) (result i32))) (table 1 funcref)";
        let error = bound("local.get 0 i32.const 0 call_indirect (type $t)", extra).unwrap_err();
        assert!(error.contains("indirect call at offset"), "{error}");
    }

    #[test]
    fn bulk_memory_needs_a_constant_length_and_the_bound_has_a_cap() {
        let extra = "(memory 1)";
        assert_eq!(bound("i32.const 0 i32.const 0 i32.const 100 memory.fill local.get 0", extra), Ok(4 + 100 + 1));
        assert!(
            bound("i32.const 0 i32.const 0 local.get 0 memory.fill local.get 0", extra).unwrap_err().contains("length")
        );
        // 2^16 trips nested three deep is 2^48 trips: beyond the cap.
        let level = |local: u32, inner: &str| {
            format!(
                "i32.const 0 local.set {local} loop {inner} local.get {local} i32.const 1 i32.add local.tee {local} i32.const 65536 i32.lt_u br_if 0 end"
            )
        };
        let body = format!("{} local.get 0", level(1, &level(2, &level(0, ""))));
        assert!(bound(&body, "").unwrap_err().contains("exceeds 2^40"), "{:?}", bound(&body, ""));
    }

    #[test]
    fn exports_are_named_and_checked_together() {
        let bytes = module("local.get 0", "(func (export \"g\") (param i32) (result i32) local.get 0 call $f)");
        assert_eq!(check_all(&bytes, &["f", "g"]), Ok(vec![("f".into(), 1), ("g".into(), 3)]));
        assert!(check(&bytes, "h").unwrap_err().contains("exports no function"));
    }

    #[test]
    fn counted_trips_match_a_simulation() {
        // Every accepted form, run for real on small cases, takes the bound when the start is known
        // and at most the bound otherwise.
        type Continues = fn(u32, u32) -> bool;
        let comparisons: [(Comparison, Continues); 9] = [
            (Comparison::LtU, |v, l| v < l),
            (Comparison::LeU, |v, l| v <= l),
            (Comparison::LtS, |v, l| (v as i32) < l as i32),
            (Comparison::LeS, |v, l| (v as i32) <= l as i32),
            (Comparison::GtU, |v, l| v > l),
            (Comparison::GeU, |v, l| v >= l),
            (Comparison::GtS, |v, l| (v as i32) > l as i32),
            (Comparison::GeS, |v, l| (v as i32) >= l as i32),
            (Comparison::Ne, |v, l| v != l),
        ];
        let values = [0u32, 1, 2, 3, 7, 10, 64, 100, 0x7fff_fff0, 0x8000_0000, 0x8000_0005, u32::MAX - 3, u32::MAX];
        let deltas = [1u32, 2, 3, 4, 16, u32::MAX, u32::MAX - 3, 0x7fff_ffff];
        for (comparison, continues) in comparisons {
            for &delta in &deltas {
                for &limit in &values {
                    for &start in &values {
                        let Ok(trips) = counted_trips(delta, comparison, limit, Some(start)) else { continue };
                        if trips > 100_000 {
                            continue;
                        }
                        let mut value = start;
                        let mut run = 0u64;
                        loop {
                            run += 1;
                            value = value.wrapping_add(delta);
                            assert!(run <= trips, "{comparison:?} {delta} {limit} {start}");
                            if !continues(value, limit) {
                                break;
                            }
                        }
                        assert_eq!(run, trips, "{comparison:?} step {delta} limit {limit} start {start}");
                        if let Ok(worst) = counted_trips(delta, comparison, limit, None) {
                            assert!(trips <= worst, "{comparison:?} {delta} {limit} {start}");
                        }
                    }
                }
            }
        }
    }

    /// Mutated modules never panic the check (a cheap fuzz; errors are fine).
    #[test]
    fn survives_mutated_modules() {
        let inner =
            "i32.const 0 local.set 2 loop local.get 2 i32.const 1 i32.add local.tee 2 i32.const 5 i32.lt_u br_if 0 end";
        let body = format!(
            "i32.const 0 local.set 1 loop {inner} block local.get 0 br_if 0 local.get 0 call $g drop end {} end local.get 0",
            counted(4, 100, "i32.ne")
        );
        let base = module(
            &body,
            "(func $g (param i32) (result i32) local.get 0 (if (result i32) (then i32.const 1) (else i32.const 2)))",
        );
        assert!(check(&base, "f").is_ok());
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            let bytes = crate::mutated(&base, &mut seed, 4, |r| (r >> 32) as u8);
            let _ = check(&bytes, "f");
            let _ = check(&bytes[..(seed as usize >> 8) % bytes.len()], "f");
        }
    }
}
