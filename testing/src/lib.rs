//! The harness of the test targets that use Linux's tools as judges (`domos/tests/system.rs`,
//! `ext2/tests/linux.rs`, each with `harness = false` in its `Cargo.toml`).
//!
//! A target lists its tests in [`main!`], each with the judges it needs. Just before a test
//! runs, its judges are probed:
//! - all there: the test runs;
//! - one missing and `CI` set (non-empty, not `false` or `0`): the test fails, naming what is
//!   missing and how `.ci/run` provides it;
//! - one missing, locally: the runner reports the test `ignored` with the reason and counts it
//!   as ignored (never as passed); after the summary, one line per skipped test goes to stderr
//!   (`skipped TEST: REASON`).
//!
//! libtest's own harness cannot ignore a test at run time (`#[ignore]` is fixed when compiling),
//! so these targets run on `libtest-mimic`, which takes libtest's command line (filters,
//! `--exact`, `--skip`, `--list`, `--test-threads`) and prints the same report, but does not
//! capture what a test prints; each test runs in a thread named after it, so a panic says
//! which test it came from.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// Something a test needs from the machine to judge what Domos did.
#[derive(Clone, Copy, Debug)]
pub struct Judge {
    /// The program's name, or what the machine must be able to do.
    pub name: &'static str,
    kind: Kind,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A program found by [`tool`], from this Debian package.
    Tool { package: &'static str },
    /// `mount -o loop`: the mount and umount programs, CAP_SYS_ADMIN and a loop device.
    LoopMount,
    /// A TAP network interface: CAP_NET_ADMIN and `/dev/net/tun`.
    Tap,
    /// A FUSE mount: CAP_SYS_ADMIN and `/dev/fuse`.
    Fuse,
}

/// e2fsprogs' file system checker.
pub const E2FSCK: Judge = Judge { name: "e2fsck", kind: Kind::Tool { package: "e2fsprogs" } };
/// e2fsprogs' file system debugger, which reads and writes files in an image.
pub const DEBUGFS: Judge = Judge { name: "debugfs", kind: Kind::Tool { package: "e2fsprogs" } };
/// e2fsprogs' file system maker.
pub const MKE2FS: Judge = Judge { name: "mke2fs", kind: Kind::Tool { package: "e2fsprogs" } };
/// clang, which compiles C for wasm32: the generated C header and the components written in C.
pub const CLANG: Judge = Judge { name: "clang", kind: Kind::Tool { package: "clang" } };
/// lld's WebAssembly linker, which clang runs to link a wasm32 module.
pub const WASM_LD: Judge = Judge { name: "wasm-ld", kind: Kind::Tool { package: "lld" } };
/// GNU make, which builds the C component `domos new --lang c` makes.
pub const MAKE: Judge = Judge { name: "make", kind: Kind::Tool { package: "make" } };
/// Mounting an image file with Linux's own file system driver (`mount -o loop`).
pub const LOOP_MOUNT: Judge = Judge { name: "a loop mount", kind: Kind::LoopMount };
/// iproute2's `ip`, which makes network namespaces and configures interfaces.
pub const IP: Judge = Judge { name: "ip", kind: Kind::Tool { package: "iproute2" } };
/// iputils' `ping`.
pub const PING: Judge = Judge { name: "ping", kind: Kind::Tool { package: "iputils-ping" } };
/// OpenBSD's netcat, a UDP and TCP client.
pub const NC: Judge = Judge { name: "nc", kind: Kind::Tool { package: "netcat-openbsd" } };
/// fio, the flexible I/O tester, which writes and verifies files through a mount.
pub const FIO: Judge = Judge { name: "fio", kind: Kind::Tool { package: "fio" } };
/// fuse3's setuid helper, which mounts a FUSE file system for a user without root.
pub const FUSERMOUNT: Judge = Judge { name: "fusermount3", kind: Kind::Tool { package: "fuse3" } };
/// Mounting a FUSE file system (`/dev/fuse`, which `mount(2)` takes from root only).
pub const FUSE: Judge = Judge { name: "a FUSE mount", kind: Kind::Fuse };
/// libnfs' user-space NFS client copying a file to or from a server (TCP only).
pub const NFS_CP: Judge = Judge { name: "nfs-cp", kind: Kind::Tool { package: "libnfs-utils" } };
/// libnfs' user-space NFS client listing a directory of a server.
pub const NFS_LS: Judge = Judge { name: "nfs-ls", kind: Kind::Tool { package: "libnfs-utils" } };
/// libnfs' user-space NFS client printing a file of a server.
pub const NFS_CAT: Judge = Judge { name: "nfs-cat", kind: Kind::Tool { package: "libnfs-utils" } };
/// Making a Linux TAP interface (`/dev/net/tun`, which needs CAP_NET_ADMIN).
pub const TAP: Judge = Judge { name: "a TAP interface", kind: Kind::Tap };
/// passt, the user-mode network behind a `[[nic]]` with `passt = { … }`.
pub const PASST: Judge = Judge { name: "passt", kind: Kind::Tool { package: "passt" } };
/// nfs-ganesha, the NFS server `domos bench nfs` measures Domos' against (its FSAL VFS is the
/// package nfs-ganesha-vfs, which `.ci/run` installs with it).
pub const GANESHA: Judge = Judge { name: "ganesha.nfsd", kind: Kind::Tool { package: "nfs-ganesha" } };
/// The portmapper nfs-ganesha registers with.
pub const RPCBIND: Judge = Judge { name: "rpcbind", kind: Kind::Tool { package: "rpcbind" } };

impl Judge {
    /// Why this judge cannot be had on this machine, or `None` when it can.
    pub fn missing(&self) -> Option<String> {
        match self.kind {
            Kind::Tool { .. } => tool(self.name).is_none().then(|| format!("{} is not installed", self.name)),
            Kind::LoopMount => loop_mount_impossible().map(|why| format!("this machine cannot loop-mount: {why}")),
            Kind::Tap => tap_impossible().map(|why| format!("this machine cannot make a TAP interface: {why}")),
            Kind::Fuse => fuse_impossible().map(|why| format!("this machine cannot mount FUSE: {why}")),
        }
    }

    /// How `.ci/run` provides this judge on a fresh Debian machine.
    fn provision(&self) -> String {
        match self.kind {
            Kind::Tool { package } => format!(".ci/run installs it from the Debian package {package}"),
            Kind::LoopMount => {
                ".ci/run installs mount (util-linux), and must run as root on a machine with loop devices".into()
            }
            Kind::Tap => ".ci/run must run as root on a machine with /dev/net/tun".into(),
            Kind::Fuse => ".ci/run installs fuse3, and must run as root on a machine with /dev/fuse".into(),
        }
    }

    /// The path of this program; panics when it is not installed (which [`main!`] checked
    /// before the test started).
    pub fn path(&self) -> PathBuf {
        tool(self.name).unwrap_or_else(|| panic!("{} is not installed", self.name))
    }
}

/// The path of the program `name`: the first executable file of that name in `PATH`, then in
/// the system directories, which a user's `PATH` often lacks (`/usr/sbin`, `/sbin`, `/usr/bin`,
/// `/bin`).
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|file| is_executable(file))
}

fn is_executable(file: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    file.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why this process lacks the capability numbered `capability`, or `None` when it has it.
fn lacks_capability(capability: u32) -> Option<String> {
    let status = match std::fs::read_to_string("/proc/self/status") {
        Ok(status) => status,
        Err(error) => return Some(format!("cannot read /proc/self/status: {error}")),
    };
    let capabilities = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
    capabilities.is_none_or(|set| set & (1 << capability) == 0).then(|| "this process is not root".into())
}

/// Why a TAP interface cannot be made here, or `None` when nothing stands in its way.
fn tap_impossible() -> Option<String> {
    const CAP_NET_ADMIN: u32 = 12;
    if let Some(why) = lacks_capability(CAP_NET_ADMIN) {
        return Some(format!("it needs CAP_NET_ADMIN: {why}"));
    }
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/net/tun") {
        Ok(_) => None,
        Err(error) => Some(format!("/dev/net/tun: {error}")),
    }
}

/// Why a FUSE file system cannot be mounted here, or `None` when nothing stands in its way.
fn fuse_impossible() -> Option<String> {
    const CAP_SYS_ADMIN: u32 = 21;
    if let Some(why) = lacks_capability(CAP_SYS_ADMIN) {
        return Some(format!("it needs CAP_SYS_ADMIN: {why}"));
    }
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        Ok(_) => None,
        Err(error) => Some(format!("/dev/fuse: {error}")),
    }
}

/// Why `mount -o loop` cannot work here, or `None` when nothing stands in its way.
fn loop_mount_impossible() -> Option<String> {
    const CAP_SYS_ADMIN: u32 = 21;
    if lacks_capability(CAP_SYS_ADMIN).is_some() {
        return Some("mounting needs root (CAP_SYS_ADMIN), which this process lacks".into());
    }
    if let Some(program) = ["mount", "umount"].into_iter().find(|program| tool(program).is_none()) {
        return Some(format!("{program} is not installed"));
    }
    // mount -o loop asks /dev/loop-control for a free loop device.
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/loop-control") {
        Ok(_) => None,
        Err(error) => Some(format!("no loop devices (/dev/loop-control: {error})")),
    }
}

/// Whether the environment variable `CI` says this is a CI run: set, non-empty, and neither
/// `false` nor `0`.
pub fn in_ci() -> bool {
    is_ci_value(std::env::var_os("CI").as_deref())
}

fn is_ci_value(value: Option<&OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// One test of a target: its name, its body, and the judges it needs.
#[derive(Debug)]
pub struct Test {
    pub name: &'static str,
    pub body: fn(),
    pub judges: &'static [Judge],
}

/// What to do with a test, given its judges.
#[derive(Debug, PartialEq)]
enum Decision {
    Run,
    /// Locally, with a judge missing: why.
    Skip(String),
    /// In CI, with a judge missing: the failure message.
    Fail(String),
}

fn decide(judges: &[Judge], ci: bool) -> Decision {
    let missing: Vec<(String, String)> =
        judges.iter().filter_map(|judge| Some((judge.missing()?, judge.provision()))).collect();
    if missing.is_empty() {
        Decision::Run
    } else if ci {
        let each: Vec<String> = missing.iter().map(|(why, how)| format!("{why} ({how})")).collect();
        Decision::Fail(format!("CI is set, so every judge must be there: {}", each.join("; ")))
    } else {
        Decision::Skip(missing.into_iter().map(|(why, _)| why).collect::<Vec<_>>().join("; "))
    }
}

/// Runs the tests as libtest would, each after deciding from its judges whether it runs (see
/// the crate's documentation). `source` is the target's source: a `#[test]` in it would silently
/// never run in a target without libtest's harness, so it stops the run instead.
pub fn run(source: &str, tests: Vec<Test>) -> ExitCode {
    if let Some(line) = source.lines().position(|line| line.trim_start().starts_with("#[test]")) {
        eprintln!(
            "line {}: #[test] has no effect in a test target with `harness = false`; list the test in \
             domos_testing::main! instead",
            line + 1
        );
        return ExitCode::FAILURE;
    }
    let ci = in_ci();
    let trials = tests.into_iter().map(|test| trial(test, ci)).collect();
    let conclusion = libtest_mimic::run(&Arguments::from_args(), trials);
    // Printed after the report rather than while tests run in parallel, to stay one line each.
    let mut skipped = SKIPPED.lock().unwrap_or_else(PoisonError::into_inner);
    skipped.sort();
    for (name, why) in skipped.iter() {
        eprintln!("skipped {name}: {why} (CI would fail it)");
    }
    conclusion.exit_code()
}

/// The tests skipped for a missing judge, and why.
static SKIPPED: Mutex<Vec<(&str, String)>> = Mutex::new(Vec::new());

fn trial(test: Test, ci: bool) -> Trial {
    let Test { name, body, judges } = test;
    Trial::ignorable_test(name, move || match decide(judges, ci) {
        Decision::Run => run_in_thread(name, body).map(|()| Completion::Completed),
        Decision::Skip(why) => {
            SKIPPED.lock().unwrap_or_else(PoisonError::into_inner).push((name, why.clone()));
            Ok(Completion::ignored_with(why))
        }
        Decision::Fail(message) => Err(message.into()),
    })
}

/// Runs `body` in a thread named `name`, as libtest does; a panic fails the test.
fn run_in_thread(name: &str, body: fn()) -> Result<(), Failed> {
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map_err(|error| format!("cannot start the test's thread: {error}"))?;
    thread.join().map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        format!("test panicked: {message}").into()
    })
}

/// The `main` of a test target with `harness = false`: lists its test functions, each optionally
/// followed by the judges it needs (`my_test: [E2FSCK, DEBUGFS]`), and runs them with [`run`].
/// The target's source must be `tests/<target name>.rs` in its package.
#[macro_export]
macro_rules! main {
    ($($test:ident $(: [$($judge:expr),+ $(,)?])?),+ $(,)?) => {
        fn main() -> ::std::process::ExitCode {
            $crate::run(
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/", env!("CARGO_CRATE_NAME"), ".rs")),
                ::std::vec![$($crate::Test { name: stringify!($test), body: $test, judges: &[$($($judge),+)?] }),+],
            )
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const ABSENT: Judge = Judge { name: "domos-no-such-tool", kind: Kind::Tool { package: "domos-nothing" } };
    const PRESENT: Judge = Judge { name: "sh", kind: Kind::Tool { package: "dash" } };

    #[test]
    fn ci_is_set_unless_empty_false_or_zero() {
        for (value, ci) in [(None, false), (Some(""), false), (Some("false"), false), (Some("0"), false)] {
            assert_eq!(is_ci_value(value.map(OsStr::new)), ci, "{value:?}");
        }
        for value in ["true", "1", "yes"] {
            assert!(is_ci_value(Some(OsStr::new(value))), "{value}");
        }
    }

    #[test]
    fn tools_are_found_only_when_installed() {
        assert!(tool("sh").is_some());
        assert_eq!(tool("domos-no-such-tool"), None);
        assert_eq!(PRESENT.missing(), None);
        assert_eq!(ABSENT.missing().as_deref(), Some("domos-no-such-tool is not installed"));
    }

    #[test]
    fn a_missing_judge_skips_locally_and_fails_in_ci() {
        assert_eq!(decide(&[], false), Decision::Run);
        assert_eq!(decide(&[PRESENT], true), Decision::Run);
        assert_eq!(decide(&[PRESENT, ABSENT], false), Decision::Skip("domos-no-such-tool is not installed".into()));
        assert_eq!(
            decide(&[ABSENT, PRESENT], true),
            Decision::Fail(
                "CI is set, so every judge must be there: domos-no-such-tool is not installed \
                 (.ci/run installs it from the Debian package domos-nothing)"
                    .into()
            )
        );
    }
}
