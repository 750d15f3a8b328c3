//! The rewrites the loader makes of a verified module before it is translated, in one pass.
//!
//! **The stack guard.** Code compiled to wasm keeps what does not fit in wasm locals (arrays,
//! structures whose address is taken) on a *shadow stack* in linear memory, addressed by the
//! mutable global `__stack_pointer`. Each Domos thread gets a region of `stack` bytes for it;
//! nothing in wasm stops a thread from moving the pointer below its region and writing over the
//! heap or another thread's stack. Every `global.set` of `__stack_pointer` therefore becomes a
//! check against a new global, `__stack_limit` (exported, set per store to the bottom of the
//! thread's region, 0 until then):
//!
//! ```text
//! local.tee $scratch  global.get $limit  i32.lt_u
//! if  call $domos_shadow_stack_overflow  end
//! local.get $scratch  global.set $__stack_pointer
//! ```
//!
//! `domos_shadow_stack_overflow` is an added function that traps (`unreachable`), named in the
//! name section so that the trap says what happened.
//!
//! **Long copies.** wasmtime carries out `memory.copy` with the host's `memmove`, and glibc's
//! copies a long range with `rep movsb`, which the processors of the machines Domos is measured
//! on (AMD EPYC, `fsrm`) run up to 38 times slower when the target lies less than
//! [`SLOW_DISTANCE`] bytes after the source modulo 4 KiB (docs/BENCHMARKS.md, "A read's blocks
//! gathered" and "Copies in a component avoid the slow `rep movsb`"). A component's copies land
//! there by chance: a `Vec` cloned, a record copied into a message. Every `memory.copy` stays
//! the instruction for a copy of at most [`COPY_PIECE`] bytes, behind a compare at its site
//! (`copy_site`), and becomes a call of an added function, `domos_memory_copy`, for a longer
//! one. That function copies such a range in pieces of [`COPY_PIECE`] bytes (below glibc's
//! threshold for `rep movsb`, so they take its vector loop) and any other as one `memory.copy`,
//! as before: overlapping ones, and ones out of bounds, which trap there before a byte is
//! written as the instruction's would. The kernel's own copies between memories split the same
//! ranges the same way.
//!
//! New types, globals, functions and exports are appended, so no existing index moves. A module
//! with no mutable `i32` `__stack_pointer` export, which the verifier refuses, is left as it is.

use wasm_encoder::reencode::{Error, Reencode, utils};
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection, GlobalSection, GlobalType,
    Instruction, NameMap, NameSection, TypeSection, ValType,
};
use wasmparser::{ExternalKind, Operator, Parser, Payload, TypeRef};

/// The name of the function an overflow traps in.
pub const OVERFLOW_FUNCTION: &str = "domos_shadow_stack_overflow";

/// The exported global the kernel sets to the bottom of each thread's stack.
pub const LIMIT_GLOBAL: &str = "__stack_limit";

/// The name of the function every `memory.copy` calls.
pub const COPY_FUNCTION: &str = "domos_memory_copy";

/// A copy whose target lies less than this many bytes after its source, modulo 4 KiB, is slow
/// as one `rep movsb`.
pub const SLOW_DISTANCE: u32 = 64;

/// The pieces such a copy is made in when it is longer than one: below glibc's threshold for
/// `rep movsb` (2,112 bytes with `fsrm`, more without).
pub const COPY_PIECE: u32 = 2048;

/// Whether a copy of `len` bytes from `src` to `dst` (addresses in one memory) goes in pieces of
/// [`COPY_PIECE`]: it is longer than one, its target lies less than [`SLOW_DISTANCE`] bytes after
/// its source modulo 4 KiB, and the two ranges do not overlap. The added function's code decides
/// the same way; the kernel's copies ask this.
#[must_use]
pub fn copies_in_pieces(src: usize, dst: usize, len: usize) -> bool {
    let overlap = dst.wrapping_sub(src) < len || src.wrapping_sub(dst) < len;
    len > COPY_PIECE as usize && dst.wrapping_sub(src) % 4096 < SLOW_DISTANCE as usize && !overlap
}

/// What the rewrite needs to know of a module, read before it.
struct Guard {
    /// `__stack_pointer`'s global index.
    stack_pointer: u32,
    /// The index the limit global gets.
    limit: u32,
    /// The index the overflow function gets.
    overflow: u32,
    /// The index the copy function gets (after the overflow function); none without a memory.
    copy: Option<u32>,
    /// A `() -> ()` type, or the index a new one gets.
    void_type: u32,
    /// Whether the void type has to be added.
    add_void_type: bool,
    /// An `(i32, i32, i32) -> ()` type, or the index a new one gets (after the void type).
    copy_type: u32,
    /// Whether the copy type has to be added (with the copy function).
    add_copy_type: bool,
    /// Parameter counts of the defined functions, in order.
    params: Vec<u32>,
    next_body: usize,
}

/// The module with its shadow stack checked and its copies rewritten; unchanged when it exports
/// no mutable `i32` `__stack_pointer` (it has no shadow stack to check).
///
/// # Errors
/// When the module cannot be parsed (the verifier has accepted it before, so this is a bug).
pub fn instrument(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let Some(mut guard) = survey(bytes).map_err(|e| format!("instrument: {e}"))? else {
        return Ok(bytes.to_vec());
    };
    let mut module = wasm_encoder::Module::new();
    guard.parse_core_module(&mut module, Parser::new(0), bytes).map_err(|e| format!("instrument: {e}"))?;
    Ok(module.finish())
}

/// Reads what the rewrite needs; `None` when there is no shadow stack pointer.
fn survey(bytes: &[u8]) -> wasmparser::Result<Option<Guard>> {
    let (mut types, mut void_type, mut copy_type) = (0u32, None, None);
    let mut func_types: Vec<u32> = Vec::new();
    let mut type_params: Vec<u32> = Vec::new();
    let (mut imported_funcs, mut globals, mut stack_pointer) = (0u32, 0u32, None);
    let mut memories = 0u32;
    let mut mutable_i32: Vec<bool> = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::TypeSection(reader) => {
                for ty in reader.into_iter_err_on_gc_types() {
                    let ty = ty?;
                    if ty.params().is_empty() && ty.results().is_empty() && void_type.is_none() {
                        void_type = Some(types);
                    }
                    let i32 = wasmparser::ValType::I32;
                    if ty.params() == [i32, i32, i32] && ty.results().is_empty() && copy_type.is_none() {
                        copy_type = Some(types);
                    }
                    type_params.push(ty.params().len() as u32);
                    types += 1;
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    match import?.ty {
                        TypeRef::Func(_) => imported_funcs += 1,
                        TypeRef::Memory(_) => memories += 1,
                        TypeRef::Global(g) => {
                            mutable_i32.push(g.mutable && g.content_type == wasmparser::ValType::I32);
                            globals += 1;
                        }
                        _ => {}
                    }
                }
            }
            Payload::MemorySection(reader) => memories += reader.count(),
            Payload::FunctionSection(reader) => {
                for ty in reader {
                    func_types.push(ty?);
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    let g = global?.ty;
                    mutable_i32.push(g.mutable && g.content_type == wasmparser::ValType::I32);
                    globals += 1;
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export?;
                    if export.name == "__stack_pointer" && export.kind == ExternalKind::Global {
                        stack_pointer = Some(export.index);
                    }
                }
            }
            _ => {}
        }
    }
    let Some(stack_pointer) = stack_pointer.filter(|&g| mutable_i32.get(g as usize) == Some(&true)) else {
        return Ok(None);
    };
    let params = func_types.iter().map(|&t| type_params.get(t as usize).copied().unwrap_or(0)).collect();
    let overflow = imported_funcs + func_types.len() as u32;
    let added_types = types + u32::from(void_type.is_none());
    Ok(Some(Guard {
        stack_pointer,
        limit: globals,
        overflow,
        copy: (memories > 0).then_some(overflow + 1),
        void_type: void_type.unwrap_or(types),
        add_void_type: void_type.is_none(),
        copy_type: copy_type.unwrap_or(added_types),
        add_copy_type: memories > 0 && copy_type.is_none(),
        params,
        next_body: 0,
    }))
}

type Rewritten<T> = Result<T, Error<std::convert::Infallible>>;

impl Reencode for Guard {
    type Error = std::convert::Infallible;

    fn parse_type_section(
        &mut self,
        types: &mut TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Rewritten<()> {
        utils::parse_type_section(self, types, section)?;
        if self.add_void_type {
            types.ty().function([], []);
        }
        if self.add_copy_type {
            types.ty().function([ValType::I32; 3], []);
        }
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Rewritten<()> {
        utils::parse_function_section(self, functions, section)?;
        functions.function(self.void_type);
        if self.copy.is_some() {
            functions.function(self.copy_type);
        }
        Ok(())
    }

    fn parse_global_section(
        &mut self,
        globals: &mut GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Rewritten<()> {
        utils::parse_global_section(self, globals, section)?;
        let ty = GlobalType { val_type: ValType::I32, mutable: true, shared: false };
        globals.global(ty, &ConstExpr::i32_const(0));
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Rewritten<()> {
        utils::parse_export_section(self, exports, section)?;
        exports.export(LIMIT_GLOBAL, ExportKind::Global, self.limit);
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Rewritten<()> {
        utils::parse_code_section(self, code, section)?;
        let mut overflow = Function::new([]);
        overflow.instruction(&Instruction::Unreachable);
        overflow.instruction(&Instruction::End);
        code.function(&overflow);
        if self.copy.is_some() {
            code.function(&copy_function());
        }
        Ok(())
    }

    fn parse_function_body(&mut self, code: &mut CodeSection, func: wasmparser::FunctionBody<'_>) -> Rewritten<()> {
        let params = self.params.get(self.next_body).copied().unwrap_or(0);
        self.next_body += 1;
        let mut locals = Vec::new();
        let mut declared = 0u32;
        for pair in func.get_locals_reader()? {
            let (count, ty) = pair?;
            declared += count;
            locals.push((count, self.val_type(ty)?));
        }
        let scratch = params + declared;
        locals.push((1, ValType::I32));
        let mut function = Function::new(locals);
        let mut reader = func.get_operators_reader()?;
        while !reader.eof() {
            match (reader.read()?, self.copy) {
                (Operator::GlobalSet { global_index }, _) if global_index == self.stack_pointer => {
                    for instruction in [
                        Instruction::LocalTee(scratch),
                        Instruction::GlobalGet(self.limit),
                        Instruction::I32LtU,
                        Instruction::If(BlockType::Empty),
                        Instruction::Call(self.overflow),
                        Instruction::End,
                        Instruction::LocalGet(scratch),
                        Instruction::GlobalSet(global_index),
                    ] {
                        function.instruction(&instruction);
                    }
                }
                (Operator::MemoryCopy { dst_mem: 0, src_mem: 0 }, Some(copy)) => {
                    for instruction in copy_site(scratch, self.copy_type, copy) {
                        function.instruction(&instruction);
                    }
                }
                (other, _) => {
                    function.instruction(&self.instruction(other)?);
                }
            }
        }
        code.function(&function);
        Ok(())
    }

    fn parse_custom_name_subsection(
        &mut self,
        names: &mut NameSection,
        section: wasmparser::Name<'_>,
    ) -> Rewritten<()> {
        let wasmparser::Name::Function(map) = section else {
            return utils::parse_custom_name_subsection(self, names, section);
        };
        let mut functions = NameMap::new();
        for naming in map {
            let naming = naming?;
            functions.append(naming.index, naming.name);
        }
        functions.append(self.overflow, OVERFLOW_FUNCTION);
        if let Some(copy) = self.copy {
            functions.append(copy, COPY_FUNCTION);
        }
        names.functions(&functions);
        Ok(())
    }
}

/// What a `memory.copy` of memory 0 becomes: the instruction itself for a copy no longer than a
/// piece (most of them; a compare and a branch more), a call of `domos_memory_copy` for the
/// others. `scratch` is the stack guard's local, free between its uses.
fn copy_site(scratch: u32, copy_type: u32, copy: u32) -> [Instruction<'static>; 9] {
    [
        Instruction::LocalTee(scratch),
        Instruction::LocalGet(scratch),
        Instruction::I32Const(COPY_PIECE as i32),
        Instruction::I32GtU,
        Instruction::If(BlockType::FunctionType(copy_type)),
        Instruction::Call(copy),
        Instruction::Else,
        Instruction::MemoryCopy { src_mem: 0, dst_mem: 0 },
        Instruction::End,
    ]
}

/// `domos_memory_copy(dst, src, len)`: `memory.copy` of memory 0, in pieces where
/// [`copies_in_pieces`] says so.
fn copy_function() -> Function {
    use Instruction as I;
    let (dst, src, len, end, piece) = (0, 1, 2, 3, 4);
    let mut f = Function::new([(1, ValType::I64), (1, ValType::I32)]);
    let whole =
        [I::LocalGet(dst), I::LocalGet(src), I::LocalGet(len), I::MemoryCopy { src_mem: 0, dst_mem: 0 }, I::Return];
    let mut emit = |instructions: &[Instruction]| {
        for instruction in instructions {
            f.instruction(instruction);
        }
    };
    // A short copy, or a target at least `SLOW_DISTANCE` after the source modulo 4 KiB: whole.
    emit(&[I::LocalGet(len), I::I32Const(COPY_PIECE as i32), I::I32LeU]);
    emit(&[I::LocalGet(dst), I::LocalGet(src), I::I32Sub, I::I32Const(4095), I::I32And]);
    emit(&[I::I32Const(SLOW_DISTANCE as i32), I::I32GeU, I::I32Or, I::If(BlockType::Empty)]);
    emit(&whole);
    emit(&[I::End]);
    // Overlapping ranges (`memmove`'s order matters), or either range beyond the memory's end (the
    // instruction traps before it writes): whole.
    emit(&[I::LocalGet(dst), I::LocalGet(src), I::I32Sub, I::LocalGet(len), I::I32LtU]);
    emit(&[I::LocalGet(src), I::LocalGet(dst), I::I32Sub, I::LocalGet(len), I::I32LtU, I::I32Or]);
    emit(&[I::MemorySize(0), I::I64ExtendI32U, I::I64Const(16), I::I64Shl, I::LocalSet(end)]);
    for start in [dst, src] {
        emit(&[I::LocalGet(start), I::I64ExtendI32U, I::LocalGet(len), I::I64ExtendI32U, I::I64Add]);
        emit(&[I::LocalGet(end), I::I64GtU, I::I32Or]);
    }
    emit(&[I::If(BlockType::Empty)]);
    emit(&whole);
    emit(&[I::End]);
    // Pieces of `COPY_PIECE`, the last one shorter.
    emit(&[I::Loop(BlockType::Empty)]);
    emit(&[I::LocalGet(len), I::I32Const(COPY_PIECE as i32), I::LocalGet(len), I::I32Const(COPY_PIECE as i32)]);
    emit(&[I::I32LtU, I::Select, I::LocalSet(piece)]);
    emit(&[I::LocalGet(dst), I::LocalGet(src), I::LocalGet(piece), I::MemoryCopy { src_mem: 0, dst_mem: 0 }]);
    for local in [dst, src] {
        emit(&[I::LocalGet(local), I::LocalGet(piece), I::I32Add, I::LocalSet(local)]);
    }
    emit(&[I::LocalGet(len), I::LocalGet(piece), I::I32Sub, I::LocalTee(len), I::BrIf(0), I::End, I::End]);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::{Engine, Instance, Module, Store, Val};

    const PROGRAM: &str = r#"(module
      (global $sp (mut i32) (i32.const 1000))
      (export "__stack_pointer" (global $sp))
      (func $frame (export "frame") (param $size i32) (result i32)
        (local $old i32)
        (local.set $old (global.get $sp))
        (global.set $sp (i32.sub (global.get $sp) (local.get $size)))
        (global.set $sp (local.get $old))
        (local.get $old)))"#;

    fn run(limit: i32, size: i32) -> Result<i32, String> {
        let bytes = instrument(&wat::parse_str(PROGRAM).unwrap()).unwrap();
        let engine = Engine::default();
        let module = Module::new(&engine, &bytes).map_err(|e| e.to_string())?;
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).map_err(|e| e.to_string())?;
        let global = instance.get_global(&mut store, LIMIT_GLOBAL).ok_or("no limit global")?;
        global.set(&mut store, Val::I32(limit)).map_err(|e| e.to_string())?;
        let frame = instance.get_typed_func::<i32, i32>(&mut store, "frame").map_err(|e| e.to_string())?;
        frame.call(&mut store, size).map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn a_frame_within_the_stack_runs_and_one_below_its_bottom_traps() {
        assert_eq!(run(0, 900), Ok(1000), "no limit set");
        assert_eq!(run(100, 900), Ok(1000), "down to the bottom exactly");
        let trap = run(100, 901).unwrap_err();
        assert!(trap.contains(OVERFLOW_FUNCTION), "{trap}");
    }

    #[test]
    fn a_module_without_a_stack_pointer_is_left_alone() {
        let bytes = wat::parse_str("(module (func (export \"f\")))").unwrap();
        assert_eq!(instrument(&bytes).unwrap(), bytes);
    }

    const COPIER: &str = r#"(module
      (memory (export "memory") 2)
      (global $sp (mut i32) (i32.const 1000))
      (export "__stack_pointer" (global $sp))
      (func (export "copy") (param i32 i32 i32) (memory.copy (local.get 0) (local.get 1) (local.get 2))))"#;

    /// The memory after `copy(dst, src, len)` of the instrumented copier, from a pattern; `Err`
    /// with the trap and whether the memory was left as it was.
    fn copied(dst: u32, src: u32, len: u32) -> Result<Vec<u8>, bool> {
        let bytes = instrument(&wat::parse_str(COPIER).unwrap()).unwrap();
        let engine = Engine::default();
        let module = Module::new(&engine, &bytes).unwrap();
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        let pattern: Vec<u8> = (0..memory.data_size(&store)).map(|i| (i % 251) as u8).collect();
        memory.data_mut(&mut store).copy_from_slice(&pattern);
        let copy = instance.get_typed_func::<(u32, u32, u32), ()>(&mut store, "copy").unwrap();
        match copy.call(&mut store, (dst, src, len)) {
            Ok(()) => Ok(memory.data(&store).to_vec()),
            Err(_) => Err(memory.data(&store) == pattern.as_slice()),
        }
    }

    #[test]
    fn every_copy_of_memory_goes_through_the_added_function() {
        let bytes = instrument(&wat::parse_str(COPIER).unwrap()).unwrap();
        let mut copies = Vec::new();
        for payload in Parser::new(0).parse_all(&bytes) {
            if let Payload::CodeSectionEntry(body) = payload.unwrap() {
                let mut reader = body.get_operators_reader().unwrap();
                let mut count = 0;
                while !reader.eof() {
                    count += usize::from(matches!(reader.read().unwrap(), Operator::MemoryCopy { .. }));
                }
                copies.push(count);
            }
        }
        // The copier's short copy, none in the overflow function, and the copy function's two
        // whole copies and its piece.
        assert_eq!(copies, [1, 0, 3]);
    }

    #[test]
    fn copies_in_pieces_and_whole_alike_copy_what_memmove_copies() {
        let pattern = copied(0, 0, 0).unwrap();
        // Short; far apart modulo 4 KiB; close, in pieces, a multiple of a piece or not;
        // overlapping either way; at the very end of the memory.
        for (dst, src, len) in [
            (100, 5000, 300),
            (40_000, 1000, 20_000),
            (4096 * 5 + 16, 4096, 4096 * 3),
            (4096 * 5 + 16, 4096, 2 * COPY_PIECE),
            (4096 * 5 + 63, 4096 * 2 + 1, 10_001),
            (4096 + 8, 4096, 10_000),
            (4096, 4096 + 8, 10_000),
            (131_072 - 5000, 1000, 5000),
        ] {
            let mut expected = pattern.clone();
            expected.copy_within(src as usize..(src + len) as usize, dst as usize);
            assert!(copied(dst, src, len) == Ok(expected), "copy({dst}, {src}, {len})");
        }
        assert!(copies_in_pieces(4096, 4096 * 5 + 16, 4096 * 3));
        assert!(!copies_in_pieces(4096, 4096 + 8, 10_000), "overlapping");
        assert!(!copies_in_pieces(4096, 4096 * 5 + 64, 4096 * 3), "far enough apart");
    }

    #[test]
    fn a_copy_beyond_the_memory_traps_before_it_writes() {
        for (dst, src, len) in [
            (131_072 - 4000, 16, 5000),
            (16, 131_072 - 4000, 5000),
            (u32::MAX - 2000 + 16, 16, 3000),
            (16, 16 + 4096, 200_000),
        ] {
            assert_eq!(copied(dst, src, len), Err(true), "copy({dst}, {src}, {len})");
        }
    }
}
