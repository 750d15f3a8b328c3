//! `domos new [--lang rust|c] NAME [DIR]`: a component outside the source tree, ready to build
//! and boot.
//!
//! A Rust crate depends by path on the SDK and interfaces of the tree this `domos` was built
//! from, and its `.cargo/config.toml` is that tree's (the linker flags both guest builds need),
//! taken from the file's text when `domos` was built, so the two cannot drift apart. A C
//! component gets this `domos`'s `domos.h` and a Makefile with the ABI's clang flags and the
//! tree's C SDK (`sdk/c/`).

use std::path::{Path, PathBuf};

/// The source tree `domos` was built from, as the build saw it.
const SOURCE_TREE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The linker flags of the guest builds: the tree's `.cargo/config.toml`, verbatim.
const CARGO_CONFIG: &str = include_str!("../../.cargo/config.toml");

/// Words a crate cannot be called: Rust keywords and the names of the standard crates.
const RESERVED: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "gen",
    "macro",
    "override",
    "priv",
    "try",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "core",
    "std",
    "alloc",
    "test",
    "proc_macro",
];

/// The command that builds both builds of a new crate, run in its directory.
pub const BUILD_COMMAND: &str =
    "cargo build --release --target wasm32-wasip1-threads && cargo build --release --target wasm32-unknown-unknown";

/// `domos new NAME [DIR]`: makes the crate `NAME` in `DIR` (default: the current directory).
///
/// # Errors
/// A name that is not a valid crate and component name, an existing directory, a source tree
/// that no longer exists, or a file that cannot be written.
pub fn run(args: &[String]) -> Result<(), String> {
    const USAGE: &str = "usage: domos new [--lang rust|c] NAME [DIR]";
    let mut lang = Lang::Rust;
    let mut words = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--lang" => {
                lang = match rest.next().map(String::as_str) {
                    Some("rust") => Lang::Rust,
                    Some("c") => Lang::C,
                    _ => return Err(format!("--lang takes rust or c\n{USAGE}")),
                }
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}\n{USAGE}")),
            word => words.push(word),
        }
    }
    let (name, dir) = match words.as_slice() {
        [name] => (*name, PathBuf::from(name)),
        [name, parent] => (*name, Path::new(parent).join(name)),
        _ => return Err(USAGE.into()),
    };
    check_name(name)?;
    let tree = source_tree(Path::new(SOURCE_TREE))?;
    let build = match lang {
        Lang::Rust => {
            create(&dir, &rust_files(name, &tree)?)?;
            // The tree's lock file pins the versions the SDK is known to build with (and lets
            // the crate build offline); cargo drops what the crate does not use.
            if let Ok(lock) = std::fs::read_to_string(tree.join("Cargo.lock")) {
                write(&dir.join("Cargo.lock"), &lock)?;
            }
            BUILD_COMMAND
        }
        Lang::C => {
            create(&dir, &c_files(name, &tree)?)?;
            C_BUILD_COMMAND
        }
    };
    println!("domos: made the component {name} in {}", dir.display());
    println!("build both builds (threaded and single-threaded):");
    println!("  cd {} && {build}", dir.display());
    println!("then boot it beside embedded components:");
    println!("  domos boot {}", dir.join("domos.toml").display());
    Ok(())
}

/// The language of a new component.
#[derive(Clone, Copy, Debug)]
enum Lang {
    Rust,
    C,
}

/// The command that builds both builds of a new C component, run in its directory.
pub const C_BUILD_COMMAND: &str = "make";

/// Refuses a name that is not a valid crate name and component manifest name: ASCII letters,
/// digits, `-` and `_`, starting with a letter, at most 64 characters, no keyword.
///
/// # Errors
/// The name and why it is refused.
pub fn check_name(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 64 {
        Some("it is longer than 64 characters")
    } else if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        Some("it does not start with an ASCII letter")
    } else if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        Some("it holds characters other than ASCII letters, digits, - and _")
    } else if RESERVED.contains(&name.replace('-', "_").as_str()) {
        Some("it is a Rust keyword or the name of a standard crate")
    } else if crate::guest::EMBEDDED.iter().any(|(embedded, _, _)| *embedded == name) {
        Some("an embedded component has that name, and a system holds one component of each name")
    } else {
        None
    };
    match why {
        Some(why) => Err(format!("{name:?} cannot name a component crate: {why}")),
        None => Ok(()),
    }
}

/// The source tree this `domos` was built from (`tree`), with the SDK and interfaces in it.
fn source_tree(tree: &Path) -> Result<PathBuf, String> {
    let found = std::fs::canonicalize(tree)
        .ok()
        .filter(|tree| tree.join("sdk/Cargo.toml").is_file() && tree.join("interfaces/Cargo.toml").is_file());
    found.ok_or_else(|| {
        format!(
            "the Domos source tree this domos was built from ({}) no longer exists or has no sdk/ and interfaces/: \
             the new crate depends on them; rebuild domos from a source tree",
            tree.display()
        )
    })
}

/// The files of a new Rust crate: path and text.
fn rust_files(name: &str, tree: &Path) -> Result<Vec<(&'static str, String)>, String> {
    let tree_text = tree.to_str().ok_or_else(|| format!("the source tree's path {} is not UTF-8", tree.display()))?;
    Ok(vec![
        ("Cargo.toml", cargo_toml(name, tree_text)),
        (".cargo/config.toml", cargo_config()),
        ("component.toml", component_toml(name)),
        ("src/lib.rs", lib_rs(name)),
        ("domos.toml", domos_toml(name)),
        ("README.md", readme(name)),
        (".gitignore", "/target\n".into()),
    ])
}

/// Writes `files` into `dir`, which must not exist.
fn create(dir: &Path, files: &[(&str, String)]) -> Result<(), String> {
    if dir.symlink_metadata().is_ok() {
        return Err(format!("{} already exists: domos new makes a new directory", dir.display()));
    }
    // The directory itself is created alone, so that one made meanwhile by another is not
    // written into.
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::create_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (file, text) in files {
        write(&dir.join(file), text)?;
    }
    Ok(())
}

/// Writes `text` into `path`, making its directory.
fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The file a cdylib named `name` is built into: cargo turns dashes into underscores.
pub fn wasm_file(name: &str) -> String {
    format!("{}.wasm", name.replace('-', "_"))
}

fn cargo_toml(name: &str, tree: &str) -> String {
    let sdk = Path::new(tree).join("sdk");
    let interfaces = Path::new(tree).join("interfaces");
    format!(
        "[package]\n\
         name = \"{name}\"\n\
         version = \"0.1.0\"\n\
         edition = \"2024\"\n\
         \n\
         [lib]\n\
         crate-type = [\"cdylib\"]\n\
         \n\
         # The SDK and interfaces of the Domos source tree `domos new` was built from.\n\
         [dependencies]\n\
         domos-sdk = {{ path = {sdk:?} }}\n\
         domos-interfaces = {{ path = {interfaces:?} }}\n\
         \n\
         # A workspace of its own: the crate builds alone, wherever it lies.\n\
         [workspace]\n\
         \n\
         # The settings of the tree's `guest` profile: small and fast, no unwinding (a panic traps\n\
         # and ends the domain).\n\
         [profile.release]\n\
         opt-level = 3\n\
         panic = \"abort\"\n\
         lto = true\n\
         codegen-units = 1\n",
        sdk = sdk.display().to_string(),
        interfaces = interfaces.display().to_string(),
    )
}

fn cargo_config() -> String {
    format!(
        "# Written by `domos new` from the Domos source tree's .cargo/config.toml: the linker flags\n\
         # both guest builds need.\n\n{CARGO_CONFIG}"
    )
}

fn component_toml(name: &str) -> String {
    format!(
        "name = \"{name}\"\n\
         version = \"0.1.0\"\n\
         description = \"A new component: serves IpcBench and calls it from its main.\"\n\
         provides = [\"IpcBench@1.0\"]\n\
         requires = []\n"
    )
}

fn lib_rs(name: &str) -> String {
    format!(
        r#"//! `{name}`: a Domos component. It serves `IpcBench` (registered under the name `IpcBench`,
//! which the configuration may translate) and, in its main, looks the service up and calls it.
//!
//! Build both builds (threaded and single-threaded), then boot:
//!
//! ```sh
//! {BUILD_COMMAND}
//! domos boot domos.toml
//! ```
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::string::String;
use domos_interfaces::ipc_bench::IpcBench;
use domos_sdk::{{CallError, Portal, names, println}};

domos_sdk::component! {{ init: init, main: main }}

/// Runs once at boot, before any main: publishes the service.
fn init() -> Result<(), CallError> {{
    names::register("IpcBench", &Adder.into_portal())
}}

/// The body of the component's first thread.
fn main() -> Result<(), CallError> {{
    let service: Portal<dyn IpcBench> = names::lookup("IpcBench")?;
    let sum = service.add3(1, 2, 3)?;
    let length = service.measure("hello from {name}")?;
    println!("{name} is up: add3(1, 2, 3) = {{sum}}, measure = {{length}} bytes");
    Ok(())
}}

/// The service: answers at once.
struct Adder;

impl IpcBench for Adder {{
    fn null(&self) -> Result<(), CallError> {{
        Ok(())
    }}
    fn add3(&self, a: u32, b: u32, c: u32) -> Result<u32, CallError> {{
        Ok(a.wrapping_add(b).wrapping_add(c))
    }}
    fn measure(&self, text: &str) -> Result<u32, CallError> {{
        Ok(text.len() as u32)
    }}
}}
"#
    )
}

fn domos_toml(name: &str) -> String {
    let file = wasm_file(name);
    format!(
        "# {name} beside the embedded demo: once compiled (threaded build) and once interpreted\n\
         # (single-threaded build). The interpreted one publishes its service under a name of its\n\
         # own and calls the compiled one's through a portal. Paths are relative to this file.\n\
         # Build first: {BUILD_COMMAND}\n\
         \n\
         [system]\n\
         name = \"{name} beside the demo\"\n\
         cpus = 2\n\
         \n\
         [[domain]]\n\
         name = \"{name}\"\n\
         heap = \"2 MiB\"\n\
         [[domain.component]]\n\
         path = \"target/wasm32-wasip1-threads/release/{file}\"\n\
         single = \"target/wasm32-unknown-unknown/release/{file}\"\n\
         \n\
         [[domain]]\n\
         name = \"{name} interpreted\"\n\
         heap = \"2 MiB\"\n\
         translator = \"pulley\"\n\
         [[domain.component]]\n\
         path = \"target/wasm32-wasip1-threads/release/{file}\"\n\
         single = \"target/wasm32-unknown-unknown/release/{file}\"\n\
         register = {{ IpcBench = \"{name}.interpreted\" }}\n\
         \n\
         # The embedded demo: a key-value store, a summarizer and their client.\n\
         [[domain]]\n\
         name = \"Store\"\n\
         heap = \"4 MiB\"\n\
         [[domain.component]]\n\
         name = \"svc-kv\"\n\
         \n\
         [[domain]]\n\
         name = \"Summary\"\n\
         heap = \"2 MiB\"\n\
         [[domain.component]]\n\
         name = \"svc-summary\"\n\
         \n\
         [[domain]]\n\
         name = \"Client\"\n\
         heap = \"2 MiB\"\n\
         [[domain.component]]\n\
         name = \"app-demo\"\n\
         args = \"rounds=1\"\n"
    )
}

fn readme(name: &str) -> String {
    let file = wasm_file(name);
    format!(
        "# {name}\n\
         \n\
         A Domos component made by `domos new`. `component.toml` is its manifest, `src/lib.rs` its\n\
         code, `domos.toml` a system that boots it.\n\
         \n\
         Build both builds (threaded for compiled domains, single-threaded for interpreted ones):\n\
         \n\
         ```sh\n\
         {BUILD_COMMAND}\n\
         ```\n\
         \n\
         They land in `target/wasm32-wasip1-threads/release/{file}` and\n\
         `target/wasm32-unknown-unknown/release/{file}`. Check them, then boot:\n\
         \n\
         ```sh\n\
         domos components target/wasm32-wasip1-threads/release/{file} target/wasm32-unknown-unknown/release/{file}\n\
         domos boot domos.toml\n\
         ```\n"
    )
}

/// The files of a new C component: path and text.
fn c_files(name: &str, tree: &Path) -> Result<Vec<(&'static str, String)>, String> {
    let sdk = tree.join("sdk").join("c");
    let sdk = sdk.to_str().filter(|s| !s.contains([' ', '\t', '$', '#', '"', '\\'])).ok_or_else(|| {
        format!("the C SDK's path {} cannot be written in a Makefile (UTF-8, no blanks or $ # \" \\)", sdk.display())
    })?;
    let mut header = String::new();
    domos_abi::render_c_header(&mut header).expect("writing to a String cannot fail");
    Ok(vec![
        ("Makefile", makefile(name, sdk)),
        ("domos.h", header),
        ("component.c", component_c(name)),
        ("domos.toml", c_domos_toml(name)),
        ("README.md", c_readme(name)),
        (".gitignore", "/build\n".into()),
    ])
}

fn makefile(name: &str, sdk: &str) -> String {
    let threaded = domos_abi::CLANG_THREADED.join(" ");
    let single = domos_abi::CLANG_SINGLE.join(" ");
    format!(
        "# Builds both builds of {name}: build/{name}.wasm (threaded, for compiled domains) and\n\
         # build/{name}.single.wasm (single-threaded, for interpreted domains), with clang and lld.\n\
         # domos.h is `domos header` of the domos that made this directory; the C SDK is the one of\n\
         # its source tree. Boot: domos boot domos.toml\n\
         \n\
         DOMOS_SDK = {sdk}\n\
         CC = clang\n\
         CFLAGS = -O2 -std=c11 -Wall -Wextra -Werror\n\
         THREADED = {threaded}\n\
         SINGLE = {single}\n\
         SOURCES = component.c $(DOMOS_SDK)/domos_sdk.c\n\
         DEPENDS = $(SOURCES) domos.h $(DOMOS_SDK)/domos_sdk.h\n\
         \n\
         all: build/{name}.wasm build/{name}.single.wasm\n\
         \n\
         build/{name}.wasm: $(DEPENDS)\n\
         \tmkdir -p build\n\
         \t$(CC) $(CFLAGS) $(THREADED) -I. -I$(DOMOS_SDK) $(SOURCES) -o $@\n\
         \n\
         build/{name}.single.wasm: $(DEPENDS)\n\
         \tmkdir -p build\n\
         \t$(CC) $(CFLAGS) $(SINGLE) -I. -I$(DOMOS_SDK) $(SOURCES) -o $@\n\
         \n\
         clean:\n\
         \trm -rf build\n\
         \n\
         .PHONY: all clean\n"
    )
}

fn component_c(name: &str) -> String {
    format!(
        r#"/* {name}: a Domos component in C. It serves IpcBench (registered under the name IpcBench,
 * which the configuration may translate), and its main prints a line.
 *
 * Build both builds with `make`, then boot: domos boot domos.toml */
#include "domos_sdk.h"

DOMOS_MANIFEST("name = \"{name}\"\n"
               "version = \"0.1.0\"\n"
               "description = \"A new component in C: serves IpcBench.\"\n"
               "provides = [\"IpcBench@1.0\"]\n"
               "requires = []\n");

/* The object of the one service (any number the component chooses). */
#define SERVICE_OBJECT 1

/* Runs once at boot, before any main: publishes the service. */
int32_t domos_init(void) {{
    int64_t portal = domos_service_create(SERVICE_OBJECT, domos_fnv1a("IpcBench@1"));
    if (portal < 0) {{
        domos_print("init failed: service_create refused");
        return 1;
    }}
    static const char name[] = "IpcBench";
    if (domos_name_register(DOMOS_ADDR(name), sizeof name - 1, (uint32_t)portal) < 0) {{
        domos_print("init failed: name_register refused");
        return 1;
    }}
    domos_handle_drop((uint32_t)portal);
    return 0;
}}

/* The body of the component's first thread. */
int32_t domos_main(void) {{
    domos_print("{name} (C) is up: serving IpcBench");
    return 0;
}}

/* One call of IpcBench: the request is decoded, the reply (Ok = 0, then the value) written
 * over it. */
int32_t domos_dispatch(uint32_t object, uint32_t method, uint32_t buffer, uint32_t len, uint32_t capacity) {{
    domos_decoder d;
    if (object != SERVICE_OBJECT || domos_decoder_init(&d, DOMOS_PTR(buffer), len) < 0) {{
        return DOMOS_ERROR_BAD_REQUEST;
    }}
    domos_decoder_drop_untaken(&d);
    uint32_t value = 0;
    if (method == domos_fnv1a("null")) {{
    }} else if (method == domos_fnv1a("add3")) {{
        uint32_t a = domos_get_u32(&d), b = domos_get_u32(&d), c = domos_get_u32(&d);
        value = a + b + c;
    }} else if (method == domos_fnv1a("measure")) {{
        const uint8_t *text;
        value = domos_get_string(&d, &text);
    }} else {{
        return DOMOS_ERROR_UNKNOWN_METHOD;
    }}
    if (d.failed) {{
        return DOMOS_ERROR_BAD_REQUEST;
    }}
    domos_encoder e;
    domos_encoder_init(&e, DOMOS_PTR(buffer), capacity);
    domos_put_u8(&e, 0);
    if (method != domos_fnv1a("null")) {{
        domos_put_u32(&e, value);
    }}
    return domos_encoder_finish(&e);
}}

/* The last portal to the service is gone. */
void domos_release(uint32_t object) {{ (void)object; }}

/* The component starts no threads. */
int32_t domos_thread_entry(uint32_t arg) {{
    (void)arg;
    return -1;
}}
"#
    )
}

fn c_domos_toml(name: &str) -> String {
    format!(
        "# {name} (C) beside an embedded component: bench-ipc times calls to the IpcBench {name}\n\
         # serves. Paths are relative to this file. Build first: {C_BUILD_COMMAND}\n\
         \n\
         [system]\n\
         name = \"{name} beside bench-ipc\"\n\
         cpus = 2\n\
         \n\
         [[domain]]\n\
         name = \"{name}\"\n\
         heap = \"2 MiB\"\n\
         [[domain.component]]\n\
         path = \"build/{name}.wasm\"\n\
         single = \"build/{name}.single.wasm\"\n\
         \n\
         [[domain]]\n\
         name = \"Client\"\n\
         heap = \"2 MiB\"\n\
         [[domain.component]]\n\
         name = \"bench-ipc\"\n\
         args = \"client 1000\"\n"
    )
}

fn c_readme(name: &str) -> String {
    format!(
        "# {name}\n\
         \n\
         A Domos component in C made by `domos new --lang c`. `component.c` is its code and\n\
         manifest, `domos.h` the header of host calls (`domos header`), `domos.toml` a system that\n\
         boots it. Build both builds (clang and lld) and boot:\n\
         \n\
         ```sh\n\
         {C_BUILD_COMMAND}\n\
         domos components build/{name}.wasm build/{name}.single.wasm\n\
         domos boot domos.toml\n\
         ```\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_no_crate_or_component_names_are_refused() {
        for good in ["hello", "my-svc", "svc_2", "A"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "2fast", "-x", "_x", "a b", "a.b", "héllo", "a/b", "..", "self", "fn", "std", "test", "svc-kv"]
        {
            assert!(check_name(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(check_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn the_cargo_config_is_the_trees() {
        let tree = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../.cargo/config.toml")).unwrap();
        assert!(cargo_config().ends_with(&tree));
        assert!(cargo_config().contains("[target.wasm32-unknown-unknown]"));
    }

    #[test]
    fn a_source_tree_that_is_gone_is_named() {
        assert!(source_tree(Path::new(SOURCE_TREE)).is_ok());
        let gone = Path::new("/nonexistent/domos-tree");
        let err = source_tree(gone).unwrap_err();
        assert!(err.contains("/nonexistent/domos-tree") && err.contains("no longer exists"), "{err}");
    }

    #[test]
    fn the_c_makefile_uses_the_abis_flags_and_the_trees_sdk() {
        let makefile = makefile("my-svc", "/src/sdk/c");
        assert!(makefile.contains(&format!("THREADED = {}\n", domos_abi::CLANG_THREADED.join(" "))));
        assert!(makefile.contains(&format!("SINGLE = {}\n", domos_abi::CLANG_SINGLE.join(" "))));
        assert!(
            makefile.contains("DOMOS_SDK = /src/sdk/c\n")
                && makefile.contains("all: build/my-svc.wasm build/my-svc.single.wasm")
        );
        assert!(c_domos_toml("my-svc").contains("single = \"build/my-svc.single.wasm\""));
    }

    #[test]
    fn the_wasm_file_of_a_dashed_name_has_underscores() {
        assert_eq!(wasm_file("my-svc"), "my_svc.wasm");
        assert!(domos_toml("my-svc").contains("path = \"target/wasm32-wasip1-threads/release/my_svc.wasm\""));
    }
}
