//! `domos bench nfs`, run small: it measures Domos' NFS server and nfs-ganesha and names every
//! figure; it leaves no namespace, process, mount, loop device or scratch file behind, also when
//! interrupted; and without root it says so at once instead of hanging.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use domos_testing::{GANESHA, IP, LOOP_MOUNT, MKE2FS, RPCBIND, TAP};

domos_testing::main! {
    bench_nfs_refuses_at_once_without_root,
    bench_nfs_measures_both_servers_and_leaves_nothing_behind: [IP, TAP, LOOP_MOUNT, MKE2FS, GANESHA, RPCBIND],
    bench_nfs_cleans_up_when_interrupted: [IP, TAP, LOOP_MOUNT, MKE2FS, GANESHA, RPCBIND],
}

const DOMOS: &str = env!("CARGO_BIN_EXE_domos");

/// What a run of `domos bench nfs` with `pid` may leave: namespaces, its scratch directory,
/// processes whose command line names the scratch directory, mounts under it.
fn leftovers(pid: u32) -> Vec<String> {
    let mut left = Vec::new();
    let namespaces = Command::new(IP.path()).args(["netns", "list"]).output().expect("ip runs");
    let tag = format!("-{pid}");
    for line in String::from_utf8_lossy(&namespaces.stdout).lines() {
        if line.starts_with("domos-nfs-") && line.split_whitespace().next().is_some_and(|n| n.ends_with(&tag)) {
            left.push(format!("namespace {line}"));
        }
    }
    let scratch = format!("domos-bench-nfs-{pid}");
    for dir in ["/dev/shm", "/tmp"] {
        if Path::new(dir).join(&scratch).exists() {
            left.push(format!("directory {dir}/{scratch}"));
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    left.extend(mounts.lines().filter(|l| l.contains(&scratch)).map(|l| format!("mount {l}")));
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&scratch) {
            left.push(format!("process {} {cmdline}", entry.file_name().to_string_lossy()));
        }
    }
    let loops = Command::new("losetup").arg("-a").output().map(|o| o.stdout).unwrap_or_default();
    left.extend(String::from_utf8_lossy(&loops).lines().filter(|l| l.contains(&scratch)).map(|l| format!("loop {l}")));
    left
}

/// A running `domos bench nfs`. If a test fails while it runs, dropping it presses Ctrl-C and
/// waits (up to a minute) for the bench to clean up, so a failed test leaves nothing behind.
struct Bench(Option<std::process::Child>);

impl Bench {
    fn start(command: &mut Command) -> Bench {
        Bench(Some(command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("domos starts")))
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }

    /// Runs the bench to its end or for at most `limit`, then interrupts it; returns its status
    /// and output.
    fn finish(mut self, limit: Duration) -> (Option<i32>, String, String) {
        let mut child = self.0.take().expect("running");
        let start = Instant::now();
        while child.try_wait().ok().flatten().is_none() && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50));
        }
        interrupt(&mut child);
        let out = child.wait_with_output().expect("the bench ends");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    }
}

/// Presses Ctrl-C on a bench still running and gives it a minute to clean up before killing it.
fn interrupt(child: &mut std::process::Child) {
    if child.try_wait().ok().flatten().is_some() {
        return;
    }
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let start = Instant::now();
    while child.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
}

impl Drop for Bench {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            interrupt(&mut child);
            let _ = child.wait();
        }
    }
}

fn bench_nfs_refuses_at_once_without_root() {
    let mut command = Command::new(DOMOS);
    command.args(["bench", "nfs", "--rounds", "1"]);
    // As root, run it as nobody; otherwise it is not root already.
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        use std::os::unix::process::CommandExt;
        command.uid(65534).gid(65534);
    }
    let bench = Bench::start(&mut command);
    let start = Instant::now();
    let (code, out, err) = bench.finish(Duration::from_secs(30));
    assert!(start.elapsed() < Duration::from_secs(10), "it took {:?}", start.elapsed());
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("needs root"), "the refusal says why: {err}");
}

fn bench_nfs_measures_both_servers_and_leaves_nothing_behind() {
    let pictures = std::env::temp_dir().join(format!("domos-bench-nfs-test-{}", std::process::id()));
    let bench = Bench::start(
        Command::new(DOMOS)
            .args(["bench", "nfs", "--json", "--rounds", "1", "--seconds", "0.3", "--pictures"])
            .arg(&pictures),
    );
    let pid = bench.pid();
    let (code, out, err) = bench.finish(Duration::from_secs(240));
    assert_eq!(code, Some(0), "{out}{err}");
    let names = [
        "nfs_getattr_udp_1",
        "nfs_getattr_udp_8",
        "nfs_getattr_tcp_1",
        "nfs_getattr_tcp_8",
        "nfs_null_udp_8",
        "nfs_read_64m",
        "nfs_write_64m",
    ];
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), names.len(), "{out}");
    for (line, name) in lines.iter().zip(names) {
        assert!(line.starts_with(&format!("{{\"suite\":\"nfs\",\"name\":\"{name}\",")), "{line}");
        let baseline = format!("\"baseline\":\"ganesha_{}\"", name.trim_start_matches("nfs_"));
        assert!(line.contains(&baseline), "{line}");
        for field in ["\"value\":", "\"baseline_value\":"] {
            let value: f64 = line
                .split(field)
                .nth(1)
                .and_then(|rest| rest.split([',', '}']).next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {field} in {line}"));
            assert!(value > 0.0, "{line}");
        }
    }
    let svg = std::fs::read_to_string(pictures.join("nfs-rate.svg")).expect("the rate picture");
    assert!(svg.contains("Domos GETATTR UDP") && svg.contains("nfs-ganesha GETATTR UDP"), "both servers drawn");
    let _ = std::fs::remove_dir_all(&pictures);
    assert_eq!(leftovers(pid), Vec::<String>::new());
}

fn bench_nfs_cleans_up_when_interrupted() {
    let bench = Bench::start(
        Command::new(DOMOS)
            .args(["bench", "nfs", "--rounds", "3", "--seconds", "3", "--pictures"])
            .arg(std::env::temp_dir().join(format!("domos-bench-nfs-interrupted-{}", std::process::id()))),
    );
    let pid = bench.pid();
    // Wait until nfs-ganesha runs in its namespace (not mke2fs or mount on the way, whose
    // command lines name the scratch directory too), then press Ctrl-C.
    let ganesha = |left: &[String]| left.iter().any(|l| l.starts_with("process") && l.contains("ganesha.nfsd"));
    let start = Instant::now();
    while !ganesha(&leftovers(pid)) && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ganesha(&leftovers(pid)), "nfs-ganesha started: {:?}", leftovers(pid));
    // finish() presses Ctrl-C at once: the limit has passed.
    let (code, out, err) = bench.finish(Duration::ZERO);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(leftovers(pid), Vec::<String>::new());
}
