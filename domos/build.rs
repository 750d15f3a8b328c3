//! Builds every guest component to wasm32 and embeds the default ones in the `domos` binary.
//!
//! Guest crates (`components/*`, `tests/components/*`) are built with the `guest` profile for
//! `wasm32-wasip1-threads` in a target directory of their own, so this nested cargo never waits
//! for the lock of the outer build. The rustup target is installed when it is missing.
//!
//! It also compiles the C baseline of the grafts (`grafts/c/`) into the binary, and writes the
//! C header generated from the ABI (`domos header`) into `target/guest/c/include/`, for
//! components written in C.

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

/// Writes `domos.h`, generated from the ABI, into `out/include`.
fn write_c_header(out: &Path) {
    let include = out.join("include");
    std::fs::create_dir_all(&include).expect("cannot create target/guest/c/include");
    let mut header = String::new();
    domos_abi::render_c_header(&mut header).expect("writing to a String cannot fail");
    std::fs::write(include.join("domos.h"), header).expect("cannot write domos.h");
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
    write_c_header(&target_dir.join("c"));
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
         /// Where the C header lies (`include/domos.h`).\n\
         pub const C_GUEST_DIR: &str = {:?};\n",
        entries.join("\n"),
        wasm_dir.display().to_string(),
        single_dir.display().to_string(),
        target_dir.join("c").display().to_string()
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("components.rs");
    std::fs::write(out, text).expect("cannot write components.rs");
}
