//! `domos.h`: the contract of this crate for components written in C, generated, never kept by
//! hand.
//!
//! [`render_c_header`] writes every host call of [`HOST_CALLS`] as an import of the `domos`
//! module, every [`HostError`] code, the message layout and its limits, the entry points of
//! [`ENTRY_POINTS`] as exports, FNV-1a for interface and method identifiers, and a macro that
//! puts the manifest into the `domos:manifest` section. `domos header` prints it; `domos/build.rs`
//! writes it where the C components of the tree include it.

use core::fmt::{self, Write};

use crate::entry_points::ENTRY_POINTS;
use crate::host_calls::{Grant, HOST_CALLS, IntType};
use crate::{
    ARGUMENTS_DOC, FNV_OFFSET_BASIS, FNV_PRIME, HOST_MODULE, HostError, MANIFEST_SECTION, MAX_MEMORY_OBJECT,
    MAX_MESSAGE_HANDLES, MESSAGE_LAYOUT_DOC, MessageLayout,
};

/// clang's arguments (besides sources, `-I`, `-O` and `-o`) for a component's threaded build, the
/// one compiled domains run: atomics, and the heap imported as a shared `env.memory` that may
/// grow to 4 GiB; `__stack_pointer` exported, for the kernel sets it for each thread.
pub const CLANG_THREADED: &[&str] = &[
    "--target=wasm32",
    "-nostdlib",
    "-ffreestanding",
    "-matomics",
    "-mbulk-memory",
    "-mmutable-globals",
    "-Wl,--no-entry",
    "-Wl,--import-memory",
    "-Wl,--shared-memory",
    "-Wl,--max-memory=4294967296",
    "-Wl,--export=__stack_pointer",
    "-Wl,-z,stack-size=65536",
];

/// clang's arguments for a component's single-threaded build, the one interpreted domains run:
/// as [`CLANG_THREADED`] without atomics and with an unshared heap.
pub const CLANG_SINGLE: &[&str] = &[
    "--target=wasm32",
    "-nostdlib",
    "-ffreestanding",
    "-mbulk-memory",
    "-mmutable-globals",
    "-Wl,--no-entry",
    "-Wl,--import-memory",
    "-Wl,--max-memory=4294967296",
    "-Wl,--export=__stack_pointer",
    "-Wl,-z,stack-size=65536",
];

/// Writes `CamelCase` as `CAMEL_CASE`.
struct Screaming<'a, W: Write>(&'a mut W);

impl<W: Write> Write for Screaming<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for (i, c) in s.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                self.0.write_char('_')?;
            }
            self.0.write_char(c.to_ascii_uppercase())?;
        }
        Ok(())
    }
}

/// Writes the words of `pieces` as the lines of a C comment no wider than about 100 columns,
/// never breaking a line inside a `code span`: the first line starts with `/*`, the others with
/// `prefix`; `close` ends the last with ` */`.
fn comment(out: &mut impl Write, prefix: &str, pieces: &[&str], close: bool) -> fmt::Result {
    out.write_str("/*")?;
    let mut width = 2;
    let mut words = pieces.iter().flat_map(|p| p.split_whitespace());
    while let Some(first) = words.next() {
        // A code span with spaces in it is one unit.
        let mut unit = [first; 8];
        let mut count = 1;
        let mut ticks = first.matches('`').count();
        while ticks % 2 == 1 && count < unit.len() {
            let Some(next) = words.next() else { break };
            unit[count] = next;
            count += 1;
            ticks += next.matches('`').count();
        }
        let len = unit[..count].iter().map(|w| w.len() + 1).sum::<usize>() - 1;
        if width + 1 + len > 100 {
            write!(out, "\n{prefix}")?;
            width = prefix.len();
        } else {
            out.write_char(' ')?;
            width += 1;
        }
        for (i, word) in unit[..count].iter().enumerate() {
            write!(out, "{}{word}", if i == 0 { "" } else { " " })?;
        }
        width += len;
    }
    if close {
        out.write_str(" */")?;
    }
    out.write_char('\n')
}

/// Writes clang's arguments `flags` on comment lines starting with ` *     `.
fn flag_lines(out: &mut impl Write, flags: &[&str]) -> fmt::Result {
    let mut width = 0;
    for flag in flags {
        if width == 0 || width + 1 + flag.len() > 100 {
            write!(out, "{} *     {flag}", if width == 0 { "" } else { "\n" })?;
            width = 7 + flag.len();
        } else {
            write!(out, " {flag}")?;
            width += 1 + flag.len();
        }
    }
    writeln!(out)
}

/// A C parameter list: `(uint32_t ptr, uint32_t len)`, or `(void)`.
fn c_params(out: &mut impl Write, params: &[(&str, IntType)]) -> fmt::Result {
    if params.is_empty() {
        return out.write_str("(void)");
    }
    out.write_char('(')?;
    for (i, (name, ty)) in params.iter().enumerate() {
        write!(out, "{}{} {name}", if i == 0 { "" } else { ", " }, ty.c_name())?;
    }
    out.write_char(')')
}

fn c_result(result: Option<IntType>) -> &'static str {
    result.map_or("void", IntType::c_name)
}

/// Writes `domos.h`.
///
/// # Errors
/// Only those of `out`.
pub fn render_c_header(out: &mut impl Write) -> fmt::Result {
    writeln!(out, "/* domos.h: the contract between the Domos kernel and components written in C.")?;
    writeln!(out, " *")?;
    writeln!(out, " * Generated from the domos-abi crate (abi/src) by `domos header`; do not edit it, regenerate it.")?;
    writeln!(out, " * It needs only the compiler's freestanding <stdint.h>: no C library.")?;
    writeln!(out, " *")?;
    writeln!(out, " * A component is a wasm32 module that")?;
    writeln!(out, " *  - imports its heap as env.memory and never executes memory.grow (domos_heap_grow asks the")?;
    writeln!(out, " *    kernel for more), and imports no function but the host calls below;")?;
    writeln!(out, " *  - defines the entry points below (DOMOS_EXPORT) and exports the mutable global")?;
    writeln!(out, " *    __stack_pointer, which the kernel sets to each thread's stack;")?;
    writeln!(out, " *  - carries its manifest, TOML, in the custom section \"{MANIFEST_SECTION}\" (DOMOS_MANIFEST);")?;
    writeln!(out, " *  - encodes portal messages as the Rust SDK does (sdk/src/wire.rs, decision 0002).")?;
    writeln!(out, " * It is built twice, with clang and lld (wasm-ld):")?;
    writeln!(out, " *   threaded, for compiled domains: clang -O2 FILES.c -o NAME.wasm")?;
    flag_lines(out, CLANG_THREADED)?;
    writeln!(out, " *   single-threaded, for interpreted domains: clang -O2 FILES.c -o NAME.single.wasm")?;
    flag_lines(out, CLANG_SINGLE)?;
    writeln!(out, " */")?;
    writeln!(out, "#ifndef DOMOS_H")?;
    writeln!(out, "#define DOMOS_H\n")?;
    writeln!(out, "#include <stdint.h>\n")?;

    writeln!(out, "/* The wasm import module of every host call. */")?;
    writeln!(out, "#define DOMOS_HOST_MODULE \"{HOST_MODULE}\"")?;
    writeln!(out, "/* The custom section that carries the manifest. */")?;
    writeln!(out, "#define DOMOS_MANIFEST_SECTION \"{MANIFEST_SECTION}\"")?;
    writeln!(out, "/* Most handles one portal message may carry. */")?;
    writeln!(out, "#define DOMOS_MAX_MESSAGE_HANDLES {MAX_MESSAGE_HANDLES}")?;
    writeln!(out, "/* Largest memory object, in bytes. */")?;
    writeln!(out, "#define DOMOS_MAX_MEMORY_OBJECT {MAX_MEMORY_OBJECT}ull\n")?;

    let encoding = "The payload's encoding is the SDK's (docs/decisions/0002-message-encoding.md): integers \
                    little-endian, a u32 length before the bytes of a string and the elements of a sequence, a \
                    u8 tag before an Option (0 None, 1 Some) or a Result (0 Ok, 1 Err), a u32 variant index \
                    before an enum's fields, and a u32 index into the handle list for a portal or memory object.";
    comment(out, "   ", &["Portal messages.", MESSAGE_LAYOUT_DOC, encoding], true)?;
    writeln!(out, "#define DOMOS_MESSAGE_PAYLOAD_OFFSET {}", MessageLayout::PAYLOAD_OFFSET)?;
    writeln!(out, "/* The length of a message with `payload_len` payload bytes and `handle_count` handles. */")?;
    writeln!(out, "#define DOMOS_MESSAGE_LEN(payload_len, handle_count) (8u + (payload_len) + 4u * (handle_count))\n")?;

    comment(out, "   ", &["Component arguments (domos_args).", ARGUMENTS_DOC], true)?;
    writeln!(out)?;

    writeln!(out, "/* Host-call errors: a negative result of a host call is one of these codes. */")?;
    for error in HostError::ALL {
        write!(out, "#define DOMOS_ERROR_")?;
        write!(Screaming(out), "{error:?}")?;
        writeln!(out, " ({}) /* {} */", error as i32, error.describe())?;
    }
    writeln!(out)?;

    writeln!(
        out,
        "/* Interfaces are identified by domos_fnv1a(\"Name@MAJOR\"), methods by domos_fnv1a(\"method\"). */"
    )?;
    writeln!(out, "static inline uint32_t domos_fnv1a(const char *text) {{")?;
    writeln!(out, "    uint32_t hash = {FNV_OFFSET_BASIS:#x}u;")?;
    writeln!(out, "    for (; *text; text++) {{")?;
    writeln!(out, "        hash ^= (uint8_t)*text;")?;
    writeln!(out, "        hash *= {FNV_PRIME:#x}u;")?;
    writeln!(out, "    }}")?;
    writeln!(out, "    return hash;")?;
    writeln!(out, "}}\n")?;

    writeln!(
        out,
        "/* Puts the manifest, string literals of TOML, into the custom section \"{MANIFEST_SECTION}\"; at file"
    )?;
    writeln!(out, " * scope, once per component:")?;
    writeln!(out, " *   DOMOS_MANIFEST(\"name = \\\"svc-x\\\"\\n\"")?;
    writeln!(out, " *                  \"version = \\\"1.0.0\\\"\\n\"")?;
    writeln!(out, " *                  \"provides = [\\\"X@1.0\\\"]\\n\");")?;
    writeln!(out, " * (An assembler directive: clang 14 puts no C variable into a custom section.) */")?;
    writeln!(out, "#define DOMOS_MANIFEST(text) \\")?;
    writeln!(
        out,
        "    __asm__(\".section \\\".custom_section.\" DOMOS_MANIFEST_SECTION \"\\\",\\\"\\\",@\\n.ascii \" #text \"\\n.text\\n\")\n"
    )?;

    writeln!(out, "/* Host calls: imports of the module \"{HOST_MODULE}\". Addresses are uint32_t offsets into the")?;
    writeln!(out, " * component's heap, such as (uint32_t)(uintptr_t)pointer. A call outside grant \"basic\" needs")?;
    writeln!(out, " * the domain to be granted it (`grants` in the configuration). */")?;
    writeln!(out, "#define DOMOS_IMPORT(name) __attribute__((import_module(DOMOS_HOST_MODULE), import_name(#name)))")?;
    for grant in Grant::ALL {
        writeln!(out, "\n/* Grant \"{}\". */", grant.name())?;
        for call in HOST_CALLS.iter().filter(|c| c.grant == grant) {
            let waits = if call.waits { "It may suspend the calling thread." } else { "" };
            let bounded = if call.bounded { "A bounded function may call it." } else { "" };
            comment(out, "   ", &[call.summary, waits, bounded], true)?;
            write!(out, "DOMOS_IMPORT({}) {} domos_{}", call.name, c_result(call.result), call.name)?;
            c_params(out, call.params)?;
            writeln!(out, ";")?;
        }
    }

    writeln!(out, "\n/* Entry points: functions the component defines for the kernel to call. The first")?;
    writeln!(out, " * ones are required; the others are exported only when the component defines them. */")?;
    writeln!(out, "#define DOMOS_EXPORT(name) __attribute__((export_name(#name)))")?;
    for entry in ENTRY_POINTS {
        comment(out, "   ", &[if entry.required { "Required." } else { "Optional." }, entry.summary], true)?;
        write!(out, "DOMOS_EXPORT({}) {} {}", entry.name, c_result(entry.result), entry.name)?;
        c_params(out, entry.params)?;
        writeln!(out, ";")?;
    }
    writeln!(out, "\n#endif /* DOMOS_H */")
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::String;

    fn header() -> String {
        let mut text = String::new();
        render_c_header(&mut text).unwrap();
        text
    }

    /// Everything the table holds is declared, with the C types of its Rust types.
    #[test]
    fn the_header_declares_every_call_error_and_entry_point() {
        let text = header();
        for call in HOST_CALLS {
            let mut declaration =
                std::format!("DOMOS_IMPORT({}) {} domos_{}", call.name, c_result(call.result), call.name);
            c_params(&mut declaration, call.params).unwrap();
            assert!(text.contains(&std::format!("{declaration};")), "{declaration}");
        }
        assert!(text.contains("DOMOS_IMPORT(memory_read) int64_t domos_memory_read(uint32_t handle, uint64_t offset, uint32_t dst, uint32_t len);"));
        assert!(text.contains(
            "DOMOS_IMPORT(thread_priority) int64_t domos_thread_priority(uint32_t thread, int32_t priority);"
        ));
        assert!(text.contains("DOMOS_IMPORT(console_write) void domos_console_write(uint32_t ptr, uint32_t len);"));
        assert!(text.contains("#define DOMOS_ERROR_INVALID_HANDLE (-1) /* invalid handle"));
        assert!(text.contains("#define DOMOS_ERROR_MUST_WAIT (-17) /*"));
        assert_eq!(text.matches("#define DOMOS_ERROR_").count(), HostError::ALL.len());
        assert!(text.contains("#define DOMOS_MAX_MESSAGE_HANDLES 16\n"));
        assert!(text.contains("[payload_len: u32][payload][handle_count: u32]"));
        assert!(text.contains(
            "DOMOS_EXPORT(domos_dispatch) int32_t domos_dispatch(uint32_t object, uint32_t method, uint32_t buffer, uint32_t len, uint32_t capacity);"
        ));
        assert!(text.contains("DOMOS_EXPORT(domos_init) int32_t domos_init(void);"));
        assert_eq!(text.matches("DOMOS_EXPORT(domos_").count(), ENTRY_POINTS.len());
        assert!(text.contains("-Wl,--shared-memory"));
    }

    /// No summary ends a comment early, and no host call's C name is an entry point's.
    #[test]
    fn the_header_is_well_formed() {
        let text = header();
        assert_eq!(text.matches("/*").count(), text.matches("*/").count());
        for line in text.lines() {
            assert!(line.len() <= 200, "{line}");
        }
        for call in HOST_CALLS {
            let c_name = std::format!("domos_{}", call.name);
            assert!(ENTRY_POINTS.iter().all(|e| e.name != c_name), "{c_name} is both a host call and an entry point");
            assert!(!call.summary.contains("*/"), "{}", call.name);
        }
        assert!(ENTRY_POINTS.iter().all(|e| !e.summary.contains("*/")));
    }

    #[test]
    fn screaming_case() {
        let mut text = String::new();
        write!(Screaming(&mut text), "{:?}", HostError::MessageTooLarge).unwrap();
        assert_eq!(text, "MESSAGE_TOO_LARGE");
    }
}
