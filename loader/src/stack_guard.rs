//! Shadow-stack overflow detection.
//!
//! Code compiled to wasm keeps what does not fit in wasm locals (arrays, structures whose address
//! is taken) on a *shadow stack* in linear memory, addressed by the mutable global
//! `__stack_pointer`. Each Domos thread gets a region of `stack` bytes for it; nothing in wasm
//! stops a thread from moving the pointer below its region and writing over the heap or another
//! thread's stack. Before translation the kernel therefore rewrites every `global.set` of
//! `__stack_pointer` into a check against a new global, `__stack_limit` (exported, set per
//! store to the bottom of the thread's region, 0 until then):
//!
//! ```text
//! local.tee $scratch  global.get $limit  i32.lt_u
//! if  call $domos_shadow_stack_overflow  end
//! local.get $scratch  global.set $__stack_pointer
//! ```
//!
//! `domos_shadow_stack_overflow` is an added function that traps (`unreachable`), named in the
//! name section so that the trap says what happened. New types, globals, functions and exports
//! are appended, so no existing index moves.

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

/// What the rewrite needs to know of a module, read before it.
struct Guard {
    /// `__stack_pointer`'s global index.
    stack_pointer: u32,
    /// The index the limit global gets.
    limit: u32,
    /// The index the overflow function gets.
    overflow: u32,
    /// A `() -> ()` type, or the index a new one gets.
    void_type: u32,
    /// Whether the void type has to be added.
    add_void_type: bool,
    /// Parameter counts of the defined functions, in order.
    params: Vec<u32>,
    next_body: usize,
}

/// The module with its shadow stack checked; unchanged when it exports no mutable `i32`
/// `__stack_pointer` (it has no shadow stack to check).
///
/// # Errors
/// When the module cannot be parsed (the verifier has accepted it before, so this is a bug).
pub fn instrument(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let Some(mut guard) = survey(bytes).map_err(|e| format!("stack guard: {e}"))? else {
        return Ok(bytes.to_vec());
    };
    let mut module = wasm_encoder::Module::new();
    guard.parse_core_module(&mut module, Parser::new(0), bytes).map_err(|e| format!("stack guard: {e}"))?;
    Ok(module.finish())
}

/// Reads what the rewrite needs; `None` when there is no shadow stack pointer.
fn survey(bytes: &[u8]) -> wasmparser::Result<Option<Guard>> {
    let (mut types, mut void_type) = (0u32, None);
    let mut func_types: Vec<u32> = Vec::new();
    let mut type_params: Vec<u32> = Vec::new();
    let (mut imported_funcs, mut globals, mut stack_pointer) = (0u32, 0u32, None);
    let mut mutable_i32: Vec<bool> = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::TypeSection(reader) => {
                for ty in reader.into_iter_err_on_gc_types() {
                    let ty = ty?;
                    if ty.params().is_empty() && ty.results().is_empty() && void_type.is_none() {
                        void_type = Some(types);
                    }
                    type_params.push(ty.params().len() as u32);
                    types += 1;
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    match import?.ty {
                        TypeRef::Func(_) => imported_funcs += 1,
                        TypeRef::Global(g) => {
                            mutable_i32.push(g.mutable && g.content_type == wasmparser::ValType::I32);
                            globals += 1;
                        }
                        _ => {}
                    }
                }
            }
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
    Ok(Some(Guard {
        stack_pointer,
        limit: globals,
        overflow: imported_funcs + func_types.len() as u32,
        void_type: void_type.unwrap_or(types),
        add_void_type: void_type.is_none(),
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
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Rewritten<()> {
        utils::parse_function_section(self, functions, section)?;
        functions.function(self.void_type);
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
            match reader.read()? {
                Operator::GlobalSet { global_index } if global_index == self.stack_pointer => {
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
                other => {
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
        names.functions(&functions);
        Ok(())
    }
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
}
