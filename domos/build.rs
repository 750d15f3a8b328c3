//! Builds every guest component to wasm32 and embeds the default ones in the `domos` binary.
//!
//! Guest crates (`components/*`, `tests/components/*`) are built with the `guest` profile for
//! `wasm32-wasip1-threads` in a target directory of their own, so this nested cargo never waits
//! for the lock of the outer build. The rustup target is installed when it is missing.
//!
//! Then it generates and builds the collocated build (decision 0015): one module linking every
//! component of `components/` that is not a scheduler, which domains with `collocate = true`
//! run. Its crate (`target/guest/collocated/`) is written here from the list of components, so
//! that the list is written nowhere else, with a package per component that compiles the
//! component's sources as a library; it is built into the same target directory, for the
//! threaded build only.
//!
//! It also compiles the C baseline of the grafts (`grafts/c/`) into the binary, the clock that
//! `domos bench iozone` gives the real iozone (`src/bench/iozone_clock.c`, embedded), and the
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

/// Compiles the clock `domos bench iozone` loads into the real iozone
/// (`src/bench/iozone_clock.c`) as a shared object in `out`, which the binary embeds.
fn build_iozone_clock(manifest_dir: &Path, out: &Path) {
    let source = manifest_dir.join("src").join("bench").join("iozone_clock.c");
    println!("cargo:rerun-if-changed={}", source.display());
    let compiler = cc::Build::new().opt_level(2).get_compiler();
    let status = compiler
        .to_command()
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o"])
        .arg(out.join("iozone_clock.so"))
        .arg(&source)
        .status()
        .expect("cannot run the C compiler");
    assert!(status.success(), "the C compiler failed to build {}", source.display());
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

/// Whether the component in `dir` is a scheduler (its manifest names the `policy` it
/// implements): schedulers are modules of their own, never collocated.
fn is_scheduler(dir: &Path) -> bool {
    let manifest = std::fs::read_to_string(dir.join("component.toml")).unwrap_or_default();
    manifest.lines().any(|line| line.trim_start().starts_with("policy"))
}

/// Writes `path` only when its text changes, so that cargo does not rebuild for nothing.
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// The manifest of the library that the collocated build compiles of the component in `dir`:
/// its package, its dependencies (paths made absolute), and its own `src/lib.rs` as an
/// `rlib` (with a copy of its `component.toml` beside, written by the caller). The component's crate itself stays a `cdylib` only: cargo does not run LTO for a
/// crate built as both, and the component's own module would lose its cross-crate inlining (a
/// portal round trip 30 % slower).
fn part_manifest(name: &str, dir: &Path) -> String {
    let path = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let manifest: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut dependencies = manifest.get("dependencies").and_then(toml::Value::as_table).cloned().unwrap_or_default();
    for (_, spec) in dependencies.iter_mut() {
        let Some(spec) = spec.as_table_mut() else { continue };
        if let Some(relative) = spec.get("path").and_then(toml::Value::as_str) {
            let absolute = dir.join(relative);
            spec.insert("path".into(), toml::Value::String(absolute.display().to_string()));
        }
    }
    let lib = dir.join("src").join("lib.rs");
    let package = toml::toml! { name = name version = "0.1.0" edition = "2024" publish = false };
    let mut part = toml::Table::new();
    part.insert("package".into(), package.into());
    part.insert("lib".into(), toml::toml! { path = (lib.display().to_string()) }.into());
    part.insert("dependencies".into(), dependencies.into());
    format!("# Generated by domos/build.rs from {}. Do not edit.\n{part}", path.display())
}

/// Writes the crate of the collocated build into `dir`: a library that depends on each of
/// `components`, compiled from its sources as an `rlib` (`parts/NAME/`), and links them into one
/// module. It is a workspace of its own with the workspace's `guest` profile and lock file, so
/// that it builds exactly what the workspace does.
fn write_collocated_crate(root: &Path, dir: &Path, components: &[(String, PathBuf)]) {
    std::fs::create_dir_all(dir).expect("cannot create target/guest/collocated");
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).expect("cannot read Cargo.toml");
    let profile_at = workspace.find("[profile.guest]").expect("Cargo.toml has a [profile.guest]");
    let profile_end = workspace[profile_at + 1..].find("\n[").map_or(workspace.len(), |end| profile_at + 1 + end);
    let profile = &workspace[profile_at..profile_end];
    let mut manifest = String::from(
        "# Generated by domos/build.rs: the collocated build (decision 0015). Do not edit.\n\
         [package]\nname = \"domos-collocated\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\npath = \"lib.rs\"\n\n[dependencies]\n",
    );
    let mut lib = String::from(
        "//! Generated by domos/build.rs: every component of `components/` but the schedulers, linked\n\
         //! into one module (decision 0015).\n#![no_std]\n",
    );
    for (name, path) in components {
        let part = dir.join("parts").join(name);
        std::fs::create_dir_all(&part).expect("cannot create target/guest/collocated/parts");
        write_if_changed(&part.join("Cargo.toml"), &part_manifest(name, path));
        // `component!` embeds the manifest beside the crate's Cargo.toml.
        let component_toml =
            std::fs::read_to_string(path.join("component.toml")).expect("a component has a component.toml");
        write_if_changed(&part.join("component.toml"), &component_toml);
        manifest += &format!("{name} = {{ path = \"parts/{name}\" }}\n");
        lib += &format!("use {} as _;\n", name.replace('-', "_"));
    }
    manifest += &format!("\n[workspace]\n\n{profile}\n");
    write_if_changed(&dir.join("Cargo.toml"), &manifest);
    write_if_changed(&dir.join("lib.rs"), &lib);
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).expect("cannot read Cargo.lock");
    // Cargo adds the crate itself to its copy of the lock; a fresh copy only when the
    // workspace's changed.
    let stamp = dir.join("Cargo.lock.source");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(lock.as_str()) {
        std::fs::write(dir.join("Cargo.lock"), &lock).expect("cannot write the collocated build's Cargo.lock");
        std::fs::write(&stamp, &lock).expect("cannot write the collocated build's lock stamp");
    }
}

/// A nested cargo for the guest builds: without the outer build's flags and target directory.
fn guest_cargo(root: &Path) -> Command {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(root);
    for var in
        ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "CARGO_TARGET_DIR", "RUSTC_WORKSPACE_WRAPPER"]
    {
        cargo.env_remove(var);
    }
    cargo
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("domos/ lies in the workspace root").to_path_buf();
    build_c_grafts(&root);
    build_iozone_clock(&manifest_dir, &PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")));
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
    let mut cargo = guest_cargo(&root);
    cargo
        .args(["build", "--profile", "guest", "--target", TARGET, "--target", SINGLE_TARGET, "--target-dir"])
        .arg(&target_dir);
    for (name, _) in defaults.iter().chain(&tests) {
        cargo.args(["-p", name]);
    }
    let status = cargo.status().expect("cannot run cargo for the guest components");
    assert!(status.success(), "building the guest components failed");

    let collocated_dir = target_dir.join("collocated");
    let collocated: Vec<_> = defaults.iter().filter(|(_, dir)| !is_scheduler(dir)).cloned().collect();
    write_collocated_crate(&root, &collocated_dir, &collocated);
    let status = guest_cargo(&root)
        .args(["build", "--profile", "guest", "--target", TARGET, "--manifest-path"])
        .arg(collocated_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .status()
        .expect("cannot run cargo for the collocated build");
    assert!(status.success(), "building the collocated build failed");

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
         /// The collocated build: every default component but the schedulers, linked into one module.\n\
         pub static COLLOCATED: &[u8] = include_bytes!({:?});\n\
         /// Where every threaded guest build lies (test components included).\n\
         pub const GUEST_DIR: &str = {:?};\n\
         /// Where every single-threaded guest build lies.\n\
         pub const SINGLE_GUEST_DIR: &str = {:?};\n\
         /// Where the components written in C are built (`NAME.wasm`, `NAME.single.wasm`), with\n\
         /// the `domos.h` they include (`include/`).\n\
         pub const C_GUEST_DIR: &str = {:?};\n",
        entries.join("\n"),
        wasm_dir.join("domos_collocated.wasm").display().to_string(),
        wasm_dir.display().to_string(),
        single_dir.display().to_string(),
        target_dir.join("c").display().to_string()
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("components.rs");
    std::fs::write(out, text).expect("cannot write components.rs");
}
