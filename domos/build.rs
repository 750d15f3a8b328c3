//! Builds every guest component to wasm32 and embeds the default ones in the `domos` binary.
//!
//! Guest crates (`components/*`, `tests/components/*`) are built with the `guest` profile for
//! `wasm32-wasip1-threads` in a target directory of their own, so this nested cargo never waits
//! for the lock of the outer build. The rustup target is installed when it is missing.
//!
//! It also compiles the C baseline of the grafts (`grafts/c/`) into the binary, and the
//! components written in C (`components/*` with `.c` files and no `Cargo.toml`) with clang for
//! wasm32, each in both builds, into `target/guest/c/`. Those are not embedded: configurations
//! load them from their files. Without clang or wasm-ld (Debian's `clang` and `lld`) the C
//! components are not built, and the build says so.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The threaded build (shared heap, atomics), run by compiled domains.
const TARGET: &str = "wasm32-wasip1-threads";
/// The single-threaded build (unshared heap, no atomics), run by interpreted domains.
const SINGLE_TARGET: &str = "wasm32-unknown-unknown";

fn crates_in(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.join("Cargo.toml").is_file() && path.join("component.toml").is_file() {
                found.push((entry.file_name().to_string_lossy().into_owned(), path));
            }
        }
    }
    found.sort();
    found
}

fn ensure_target(target: &str) {
    let sysroot = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot.is_some_and(|s| s.join("lib/rustlib").join(target).is_dir());
    if !installed {
        let status = Command::new("rustup").args(["target", "add", target]).status();
        if !status.is_ok_and(|s| s.success()) {
            panic!("the Rust target {target} is missing and `rustup target add {target}` failed");
        }
    }
}

/// Compiles the grafts' C baseline (`grafts/c/`) as the paper did, with `-O2`, into a static
/// library linked into `domos` (called from `src/bench/native.rs`).
fn build_c_grafts(root: &Path) {
    let dir = root.join("grafts").join("c");
    println!("cargo:rerun-if-changed={}", dir.display());
    cc::Build::new()
        .files(["page_eviction.c", "md5.c", "logical_disk.c"].map(|file| dir.join(file)))
        .include(&dir)
        .opt_level(2)
        .std("c11")
        .warnings(true)
        .extra_warnings(true)
        .compile("domos_grafts_c");
}

/// The components written in C: directories with `.c` files and no `Cargo.toml`, each with its
/// sources.
fn c_components_in(dir: &Path) -> Vec<(String, Vec<PathBuf>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.join("Cargo.toml").exists() {
            continue;
        }
        let mut sources: Vec<PathBuf> = std::fs::read_dir(&path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect();
        if !sources.is_empty() {
            sources.sort();
            found.push((entry.file_name().to_string_lossy().into_owned(), sources));
        }
    }
    found.sort();
    found
}

/// The program `name` in `PATH`.
fn program(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// Writes `domos.h` into `out/include` and compiles each C component twice with clang, with the
/// flags of `domos_abi` and the C SDK (`sdk/c/`): `out/NAME.wasm` (threaded) and
/// `out/NAME.single.wasm` (single-threaded).
fn build_c_components(root: &Path, out: &Path) {
    let components = c_components_in(&root.join("components"));
    let include = out.join("include");
    std::fs::create_dir_all(&include).expect("cannot create target/guest/c/include");
    let mut header = String::new();
    domos_abi::render_c_header(&mut header).expect("writing to a String cannot fail");
    std::fs::write(include.join("domos.h"), header).expect("cannot write domos.h");
    let (Some(clang), Some(_)) = (program("clang"), program("wasm-ld")) else {
        let names: Vec<&str> = components.iter().map(|(name, _)| name.as_str()).collect();
        println!(
            "cargo:warning=clang or wasm-ld is missing (Debian packages clang and lld): the C components ({}) are not built",
            names.join(", ")
        );
        return;
    };
    let sdk = root.join("sdk").join("c");
    for (name, sources) in &components {
        for (flags, file) in [
            (domos_abi::CLANG_THREADED, format!("{name}.wasm")),
            (domos_abi::CLANG_SINGLE, format!("{name}.single.wasm")),
        ] {
            let status = Command::new(&clang)
                .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"])
                .args(flags)
                .arg("-I")
                .arg(&include)
                .arg("-I")
                .arg(&sdk)
                .args(sources)
                .arg(sdk.join("domos_sdk.c"))
                .arg("-o")
                .arg(out.join(&file))
                .status()
                .expect("cannot run clang");
            assert!(status.success(), "clang failed to build {file} from components/{name}");
        }
    }
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("domos/ lies in the workspace root").to_path_buf();
    build_c_grafts(&root);
    for watched in [
        "abi",
        "sdk",
        "interfaces",
        "grafts",
        "ext2",
        "schedulers",
        "components",
        "tests/components",
        ".cargo/config.toml",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let defaults = crates_in(&root.join("components"));
    let tests = crates_in(&root.join("tests/components"));
    ensure_target(TARGET);
    ensure_target(SINGLE_TARGET);

    let target_dir = root.join("target").join("guest");
    build_c_components(&root, &target_dir.join("c"));
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(&root)
        .args(["build", "--profile", "guest", "--target", TARGET, "--target", SINGLE_TARGET, "--target-dir"])
        .arg(&target_dir);
    for (name, _) in defaults.iter().chain(&tests) {
        cargo.args(["-p", name]);
    }
    for var in
        ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "CARGO_TARGET_DIR", "RUSTC_WORKSPACE_WRAPPER"]
    {
        cargo.env_remove(var);
    }
    let status = cargo.status().expect("cannot run cargo for the guest components");
    assert!(status.success(), "building the guest components failed");

    let wasm_dir = target_dir.join(TARGET).join("guest");
    let single_dir = target_dir.join(SINGLE_TARGET).join("guest");
    let entries: Vec<String> = defaults
        .iter()
        .map(|(name, _)| {
            let file = format!("{}.wasm", name.replace('-', "_"));
            let threaded = wasm_dir.join(&file).display().to_string();
            let single = single_dir.join(&file).display().to_string();
            format!("    ({name:?}, include_bytes!({threaded:?}), include_bytes!({single:?})),")
        })
        .collect();
    let text = format!(
        "/// The default components, built from `components/`: name, threaded build, single-threaded build.\n\
         pub static EMBEDDED: &[(&str, &[u8], &[u8])] = &[\n{}\n];\n\
         /// Where every threaded guest build lies (test components included).\n\
         pub const GUEST_DIR: &str = {:?};\n\
         /// Where every single-threaded guest build lies.\n\
         pub const SINGLE_GUEST_DIR: &str = {:?};\n\
         /// Where the components written in C are built (`NAME.wasm`, `NAME.single.wasm`), with\n\
         /// the `domos.h` they include (`include/`).\n\
         pub const C_GUEST_DIR: &str = {:?};\n",
        entries.join("\n"),
        wasm_dir.display().to_string(),
        single_dir.display().to_string(),
        target_dir.join("c").display().to_string()
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("components.rs");
    std::fs::write(out, text).expect("cannot write components.rs");
}
