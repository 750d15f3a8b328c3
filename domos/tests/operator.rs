//! The operator's view of a running system: the real `domos` binary boots a long-running
//! configuration with its control socket in a private temporary directory, and `domos ps`,
//! `kill`, `trace`, `top` and `shutdown` (and raw clients sending garbage) talk to it. Every
//! wait is bounded.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DOMOS: &str = env!("CARGO_BIN_EXE_domos");

/// A fresh directory of mode 0700 under the system's temporary directory.
fn private_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("domos-operator-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).expect("temporary directory");
    dir
}

/// A configuration that runs until stopped: a service, a domain whose threads block for good,
/// and a sandbox whose child blocks for good (the parent of `ps`'s child line).
fn long_config(dir: &Path) -> PathBuf {
    let hostile = Path::new(domos::GUEST_DIR).join("test_hostile.wasm");
    let config = format!(
        "[system]\nname = \"long-running\"\ncpus = 2\n\n\
         [[domain]]\nname = \"Store\"\n[[domain.component]]\nname = \"svc-kv\"\n\n\
         [[domain]]\nname = \"Sleeper\"\n[[domain.component]]\npath = {:?}\nargs = \"block-forever\"\n\n\
         [[domain]]\nname = \"Sandbox\"\nheap = \"24 MiB\"\ngrants = [\"domains\"]\n[[domain.component]]\n\
         name = \"app-sandbox\"\nargs = \"2097152 4194304 test-hostile block-forever\"\n",
        hostile.display().to_string()
    );
    let path = dir.join("long.toml");
    std::fs::write(&path, config).expect("configuration written");
    path
}

/// A running `domos boot`, killed if a test fails before shutting it down.
struct Boot {
    child: Child,
    stdout: Arc<Mutex<String>>,
}

impl Boot {
    fn start(config: &Path, socket: &Path) -> Boot {
        let mut child = Command::new(DOMOS)
            .args(["boot", &config.display().to_string(), "--control", &socket.display().to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("domos boot starts");
        let stdout = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stdout.take().expect("stdout piped");
        let collected = stdout.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                collected.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        Boot { child, stdout }
    }

    fn output(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// Waits at most `limit` for the boot to exit; its status.
    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the reader collect the last lines.
                std::thread::sleep(Duration::from_millis(200));
                return status;
            }
            assert!(start.elapsed() < limit, "domos boot did not exit within {limit:?}: {}", self.output());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Boot {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `domos ARGS`, killed after 60 s.
fn domos(args: &[&str]) -> Output {
    let mut child = Command::new(DOMOS)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("domos runs");
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("domos {args:?} did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Sends `bytes` on a raw connection, closes its sending side and returns the reply (at most
/// 10 s).
fn raw(socket: &Path, bytes: &[u8]) -> String {
    let mut stream = UnixStream::connect(socket).expect("connects");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer (and close) before taking everything: a failed write is fine.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply
}

/// The line of `ps` output `ps` about domain `name`.
fn ps_line<'a>(ps: &'a str, name: &str) -> &'a str {
    ps.lines().find(|l| l.split_whitespace().nth(2) == Some(name)).unwrap_or_else(|| panic!("no {name} in:\n{ps}"))
}

#[test]
fn the_operator_lists_kills_traces_starts_and_shuts_down_a_running_system() {
    let dir = private_dir("commands");
    let config = long_config(&dir);
    // The socket's own directory does not exist yet: boot makes it, mode 0700.
    let socket = dir.join("run").join("control");
    let control = socket.display().to_string();
    let mut boot = Boot::start(&config, &socket);

    // Wait (bounded) until the sandbox's child has been created and blocks.
    let start = Instant::now();
    let ps = loop {
        let out = domos(&["ps", "--control", &control]);
        let listing = text(&out.stdout);
        if out.status.success() && listing.contains("sandboxed-test-hostile") {
            break listing;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no child after 60 s: {}", boot.output());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(boot.output().contains(&format!("domos: control socket {control}")), "{}", boot.output());
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&socket), 0o600, "the socket is the owner's only");
    assert_eq!(mode(socket.parent().unwrap()), 0o700, "in a directory only the owner enters");

    // ps: id, parent and the boot summary's report of every domain.
    assert!(ps.starts_with("global scheduler stride\n"), "{ps}");
    for name in ["Store", "Sleeper", "Sandbox"] {
        let line = ps_line(&ps, name);
        assert!(line.split_whitespace().nth(1) == Some("-") && line.ends_with("running"), "{line}");
    }
    let child = ps_line(&ps, "sandboxed-test-hostile");
    assert_eq!(child.split_whitespace().nth(1), Some("Sandbox"), "the child's parent: {child}");
    assert!(ps_line(&ps, "Store").contains("heap") && ps_line(&ps, "Store").contains("threads 1"), "{ps}");

    // kill: the domain and its child end, with the operator's reason; the rest runs on.
    let killed = domos(&["kill", "Sandbox", "--control", &control]);
    assert!(killed.status.success(), "{}", text(&killed.stderr));
    assert!(text(&killed.stdout).starts_with("killed Sandbox (id "), "{}", text(&killed.stdout));
    let ps = text(&domos(&["ps", "--control", &control]).stdout);
    assert!(ps_line(&ps, "Sandbox").ends_with("terminated: killed by the operator"), "{ps}");
    assert!(ps_line(&ps, "sandboxed-test-hostile").ends_with("terminated: its parent Sandbox ended"), "{ps}");
    assert!(ps_line(&ps, "Sleeper").ends_with("running"), "{ps}");
    for (name, error) in [
        ("Nope", "no domain named \"Nope\""),
        ("Sandbox", "domain Sandbox has already ended: killed by the operator"),
        ("global-scheduler", "global-scheduler is the kernel's own domain"),
    ] {
        let refused = domos(&["kill", name, "--control", &control]);
        assert_eq!(refused.status.code(), Some(1), "kill {name}");
        assert!(text(&refused.stderr).contains(error), "kill {name}: {}", text(&refused.stderr));
    }

    // trace: a window of the thread activity trace, in boot --trace's format.
    let out = dir.join("window.json");
    let traced = domos(&["trace", "--seconds", "1", &out.display().to_string(), "--control", &control]);
    assert!(traced.status.success(), "{}", text(&traced.stderr));
    let json = std::fs::read_to_string(&out).expect("the trace is written");
    assert!(json.starts_with("{\"displayTimeUnit\":\"ns\",\"traceEvents\":["), "{json}");
    assert!(json.contains("\"args\":{\"name\":\"Sleeper\"}"), "{json}");
    assert!(json.trim_end().ends_with("\"dropped_events\":0}}"), "{json}");
    for bad in ["0", "601", "x"] {
        let refused = domos(&["trace", "--seconds", bad, "t.json", "--control", &control]);
        assert_eq!(refused.status.code(), Some(1), "trace --seconds {bad}");
    }

    // top: ps by CPU time, a bounded number of screens.
    let top = domos(&["top", "--iterations", "2", "--control", &control]);
    assert!(top.status.success(), "{}", text(&top.stderr));
    assert_eq!(text(&top.stdout).matches("Sleeper").count(), 2, "{}", text(&top.stdout));

    // Bad clients each get a clear error; the system is unaffected.
    assert!(raw(&socket, b"\xff\xfe\x00garbage\n").starts_with("error: the request is not UTF-8 text"));
    assert!(raw(&socket, b"frobnicate now\n").starts_with("error: unknown request \"frobnicate now\""));
    assert!(raw(&socket, &[b'p'; 5000]).starts_with("error: request longer than 4096 bytes"));
    assert!(raw(&socket, b"ps").starts_with("ok\nglobal scheduler"), "a request ended by hanging up");
    drop(UnixStream::connect(&socket).expect("connects"));
    let silent = Instant::now();
    let mut idle = UnixStream::connect(&socket).expect("connects");
    idle.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reply = String::new();
    let _ = idle.read_to_string(&mut reply);
    assert_eq!(reply, "error: no complete request within 2 s\n");
    assert!(silent.elapsed() < Duration::from_secs(8), "a silent client is dropped after 2 s");

    // A flood: connections that send nothing hold the 8 servers; the others are told busy.
    let flood: Vec<UnixStream> = (0..12).map(|_| UnixStream::connect(&socket).expect("connects")).collect();
    std::thread::sleep(Duration::from_millis(300));
    let busy = flood
        .into_iter()
        .map(|mut stream| {
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut reply = String::new();
            let _ = stream.read_to_string(&mut reply);
            reply
        })
        .filter(|reply| reply.starts_with("error: busy"))
        .count();
    assert!(busy >= 4, "connections beyond 8 are refused, {busy} were");

    // Two operators at once are both served.
    let both: Vec<_> = (0..2)
        .map(|_| {
            let control = control.clone();
            std::thread::spawn(move || domos(&["ps", "--control", &control]))
        })
        .collect();
    for ps in both {
        let ps = ps.join().unwrap();
        assert!(ps.status.success() && text(&ps.stdout).contains("Sleeper"), "{}", text(&ps.stderr));
    }

    // start: a fragment's domains join the running system, their providers among the running.
    let fragment = dir.join("fragment.toml");
    std::fs::write(
        &fragment,
        "[[domain]]\nname = \"Summary\"\n[[domain.component]]\nname = \"svc-summary\"\n\n\
         [[domain]]\nname = \"Client\"\n[[domain.component]]\nname = \"app-demo\"\nargs = \"rounds=1\"\n",
    )
    .unwrap();
    let started = domos(&["start", &fragment.display().to_string(), "--control", &control]);
    assert!(started.status.success(), "{}", text(&started.stderr));
    let said = text(&started.stdout);
    assert!(said.contains("started Summary (id ") && said.contains("started Client (id "), "{said}");
    let again = domos(&["start", &fragment.display().to_string(), "--control", &control]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("the name Summary is in use"), "{}", text(&again.stderr));
    let unmet = dir.join("unmet.toml");
    std::fs::write(&unmet, "[[domain]]\nname = \"Files\"\n[[domain.component]]\nname = \"app-fs\"\n").unwrap();
    let refused = domos(&["start", &unmet.display().to_string(), "--control", &control]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(text(&refused.stderr).contains("app-fs"), "{}", text(&refused.stderr));
    let start = Instant::now();
    while !boot.output().contains("[Client] demo finished: ok") {
        assert!(start.elapsed() < Duration::from_secs(60), "the started client did not finish: {}", boot.output());
        std::thread::sleep(Duration::from_millis(100));
    }
    let ps = text(&domos(&["ps", "--control", &control]).stdout);
    assert!(!ps.contains("Files") && ps_line(&ps, "Summary").contains("calls served       2"), "{ps}");

    // A name with a space, of a component loaded from its file at boot, started and killed.
    let owl = dir.join("owl.toml");
    std::fs::write(
        &owl,
        "[[domain]]\nname = \"Night Owl\"\n[[domain.component]]\nname = \"test-hostile\"\nargs = \"block-forever\"\n",
    )
    .unwrap();
    let started = domos(&["start", &owl.display().to_string(), "--control", &control]);
    assert!(text(&started.stdout).starts_with("started Night Owl (id "), "{}", text(&started.stderr));
    let killed = domos(&["kill", "Night Owl", "--control", &control]);
    assert!(text(&killed.stdout).starts_with("killed Night Owl (id "), "{}", text(&killed.stderr));
    let ps = text(&domos(&["ps", "--control", &control]).stdout);
    let owl_line = ps.lines().find(|l| l.contains("Night Owl")).unwrap_or_default();
    assert!(owl_line.ends_with("terminated: killed by the operator"), "{ps}");

    // shutdown: the boot's wait ends, it prints the summary and exits 0, the socket goes.
    let stopped = domos(&["shutdown", "--control", &control]);
    assert!(stopped.status.success(), "{}", text(&stopped.stderr));
    let status = boot.wait(Duration::from_secs(30));
    let output = boot.output();
    assert!(status.success(), "exit {status}: {output}");
    assert!(output.contains("domos: shutdown requested by the operator\ndomain summary"), "{output}");
    assert!(output.contains("terminated: killed by the operator"), "{output}");
    assert!(!socket.exists() && !socket.parent().unwrap().exists(), "the socket and its directory are removed");
    let gone = domos(&["ps", "--control", &control]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(text(&gone.stderr).contains("no running domos answers at"), "{}", text(&gone.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_socket_others_can_reach_or_in_use_is_refused_a_stale_one_replaced_and_other_users_turned_away() {
    let dir = private_dir("refused");
    let config = long_config(&dir);
    let open = dir.join("open");
    std::fs::DirBuilder::new().mode(0o755).create(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = open.join("control").display().to_string();
    let refused = domos(&["boot", &config.display().to_string(), "--control", &socket]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(text(&refused.stderr).contains("that only you can enter"), "{}", text(&refused.stderr));

    // A second boot at the socket of a running one is refused, and the first runs on.
    let socket = dir.join("control");
    let control = socket.display().to_string();
    let mut first = Boot::start(&config, &socket);
    let start = Instant::now();
    while !domos(&["ps", "--control", &control]).status.success() {
        assert!(start.elapsed() < Duration::from_secs(60), "no socket after 60 s: {}", first.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    // Another user is refused by the server's uid check even when the file modes would let it
    // in (run as root with setpriv only; elsewhere the modes alone keep others out).
    let setpriv = Path::new("/usr/bin/setpriv");
    // SAFETY: geteuid reads the process's effective uid and cannot fail.
    if unsafe { libc::geteuid() } == 0 && setpriv.exists() {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        let other = Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", DOMOS, "ps", "--control", &control])
            .output()
            .expect("setpriv runs");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(other.status.code(), Some(1), "{}", text(&other.stdout));
        assert!(text(&other.stderr).contains("permission denied: uid 65534"), "{}", text(&other.stderr));
    } else {
        eprintln!("not root or no setpriv: the uid check against another user is not exercised");
    }
    let second = domos(&["boot", &config.display().to_string(), "--control", &control, "--timeout", "5"]);
    assert_eq!(second.status.code(), Some(1));
    assert!(text(&second.stderr).contains("another domos is running there"), "{}", text(&second.stderr));
    assert!(domos(&["shutdown", "--control", &control]).status.success());
    assert!(first.wait(Duration::from_secs(30)).success(), "{}", first.output());

    // A boot killed by a signal leaves its socket; the next boot replaces it.
    let mut killed = Boot::start(&config, &socket);
    let start = Instant::now();
    while !domos(&["ps", "--control", &control]).status.success() {
        assert!(start.elapsed() < Duration::from_secs(60), "no socket after 60 s: {}", killed.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    killed.child.kill().unwrap();
    killed.wait(Duration::from_secs(30));
    assert!(socket.exists(), "a killed boot cannot remove its socket");
    let mut next = Boot::start(&config, &socket);
    let start = Instant::now();
    while !domos(&["ps", "--control", &control]).status.success() {
        assert!(start.elapsed() < Duration::from_secs(60), "the stale socket was not replaced: {}", next.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(domos(&["shutdown", "--control", &control]).status.success());
    assert!(next.wait(Duration::from_secs(30)).success(), "{}", next.output());
    assert!(!socket.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
