//! What benchmarks (`domos bench nfs`) and the network tests need of the Linux host, each with
//! the guard that undoes it: network namespaces, threads that open sockets inside one, processes
//! started in a process group of their own, loop mounts, a scratch directory, and Ctrl-C turned
//! into an error so that every guard runs on the way out.
//!
//! Nothing here reaches beyond the machine: the namespaces made here have only their loopback
//! and the TAP card moved into them.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by the SIGINT and SIGTERM handlers [`Interruptible`] installs.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// While alive, Ctrl-C (SIGINT) and SIGTERM set a flag instead of ending the process, so that the
/// bench stops at its next [`check_interrupted`] and its guards clean up; dropping it restores
/// the previous dispositions.
pub struct Interruptible {
    previous: [(libc::c_int, libc::sighandler_t); 2],
}

impl Interruptible {
    /// Installs the handlers.
    pub fn install() -> Interruptible {
        INTERRUPTED.store(false, Ordering::Relaxed);
        let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: `on_interrupt` only stores to an atomic, which is async-signal-safe; `signal`
        // takes plain integers and a function address that lives for the whole program.
        let previous = unsafe {
            [(libc::SIGINT, libc::signal(libc::SIGINT, handler)), (libc::SIGTERM, libc::signal(libc::SIGTERM, handler))]
        };
        Interruptible { previous }
    }
}

impl Drop for Interruptible {
    fn drop(&mut self) {
        for (signal, handler) in self.previous {
            // SAFETY: restores the disposition `signal` returned for the same signal.
            unsafe { libc::signal(signal, handler) };
        }
    }
}

/// An error when the operator pressed Ctrl-C (or sent SIGTERM) since [`Interruptible::install`].
///
/// # Errors
/// `interrupted`, once the flag is set.
pub fn check_interrupted() -> Result<(), String> {
    if INTERRUPTED.load(Ordering::Relaxed) { Err("interrupted".into()) } else { Ok(()) }
}

/// Sleeps `duration`, in steps that notice an interruption.
///
/// # Errors
/// When interrupted.
pub fn sleep(duration: Duration) -> Result<(), String> {
    let end = Instant::now() + duration;
    loop {
        check_interrupted()?;
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

/// The path of an installed program, searched in the usual system directories (root's `PATH`
/// may lack the `sbin` ones).
///
/// # Errors
/// When it is not installed, naming the Debian package that has it.
pub fn tool(name: &str, package: &str) -> Result<PathBuf, String> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.exists())
        .ok_or_else(|| format!("{name} is not installed (Debian package {package})"))
}

/// Runs `program ARGS` to its end; an error carries its standard error.
///
/// # Errors
/// When it cannot start or fails.
pub fn run(program: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{} {}: {}", program.display(), args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// A network namespace of the bench's own (`ip netns add`) with its loopback up, deleted with
/// whatever is still in it (a moved TAP card, a veth end) when dropped.
pub struct Namespace {
    name: String,
    ip: PathBuf,
}

impl Namespace {
    /// Makes the namespace `name` and brings its loopback up.
    ///
    /// # Errors
    /// When `ip` is missing or refuses (a name in use, no privilege).
    pub fn new(name: String) -> Result<Namespace, String> {
        let ip = tool("ip", "iproute2")?;
        run(&ip, &["netns", "add", &name])?;
        let namespace = Namespace { name, ip };
        namespace.ip(&["link", "set", "lo", "up"])?;
        Ok(namespace)
    }

    /// Runs `ip -n NAME ARGS`.
    ///
    /// # Errors
    /// When `ip` refuses.
    pub fn ip(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run(&self.ip, &all)
    }

    /// Moves the host's interface `link` into this namespace, gives it the MTU `mtu`, switches
    /// IPv6 off on it (no router solicitations), gives it `address` (`10.99.0.1/24`) and brings
    /// it up.
    ///
    /// # Errors
    /// When `ip` refuses.
    pub fn adopt(&self, link: &str, address: &str, mtu: u32) -> Result<(), String> {
        run(&self.ip, &["link", "set", link, "netns", &self.name])?;
        // The Linux end takes the card's MTU, so that both ends send frames of the same size.
        self.ip(&["link", "set", link, "mtu", &mtu.to_string()])?;
        // Best effort: without IPv6 on the link there is nothing to switch off.
        let _ = self.run_inside(&["sysctl", "-q", "-w", &format!("net.ipv6.conf.{link}.disable_ipv6=1")]);
        self.ip(&["addr", "add", address, "dev", link])?;
        self.ip(&["link", "set", link, "up"])?;
        Ok(())
    }

    /// Runs `ARGS` inside the namespace to its end (`ip netns exec`).
    ///
    /// # Errors
    /// When it fails.
    pub fn run_inside(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["netns", "exec", self.name.as_str()];
        all.extend_from_slice(args);
        run(&self.ip, &all)
    }

    /// A command that runs `program` inside the namespace (`ip netns exec NAME program`).
    pub fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(&self.ip);
        command.args(["netns", "exec", &self.name]).arg(program);
        command
    }

    /// Runs `work` on a thread that has entered the namespace (`setns`), and returns its result:
    /// sockets it opens stay in the namespace wherever they are used later. The calling thread's
    /// own namespace does not change.
    ///
    /// # Errors
    /// When the namespace cannot be entered, or `work`'s error.
    pub fn within<T: Send>(&self, work: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
        let path = Path::new("/run/netns").join(&self.name);
        let file = std::fs::File::open(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    // SAFETY: `file` is an open namespace file that outlives this scoped thread;
                    // setns changes only the calling thread's network namespace, on a thread
                    // made for it.
                    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                        return Err(format!("cannot enter the network namespace: {}", std::io::Error::last_os_error()));
                    }
                    work()
                })
                .join()
                .map_err(|_| "the thread inside the network namespace panicked".to_string())?
        })
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Err(e) = run(&self.ip, &["netns", "del", &self.name]) {
            warn(&format!("cannot delete the network namespace {}: {e}", self.name));
        }
    }
}

/// Processes started in a process group of their own (so a Ctrl-C at the terminal reaches the
/// bench, not them), stopped together when dropped: SIGTERM to the group, up to `grace` for them
/// to end (nfs-ganesha takes 5–10 s), then SIGKILL.
pub struct ProcessGroup {
    child: Child,
    what: String,
    grace: Duration,
}

impl ProcessGroup {
    /// Starts `command` as the leader of a new process group.
    ///
    /// # Errors
    /// When it cannot start.
    pub fn spawn(mut command: Command, what: &str, grace: Duration) -> Result<ProcessGroup, String> {
        use std::os::unix::process::CommandExt;
        let child =
            command.process_group(0).stdin(Stdio::null()).spawn().map_err(|e| format!("cannot start {what}: {e}"))?;
        Ok(ProcessGroup { child, what: what.to_string(), grace })
    }

    /// Whether the group's leader still runs; its exit status when it ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends `signal` to the whole group.
    fn signal(&self, signal: libc::c_int) -> bool {
        let Ok(group) = libc::pid_t::try_from(self.child.id()) else { return false };
        // SAFETY: plain integer arguments. The group is the one this child leads; Linux does not
        // hand out its id again while any member lives, and once none does this only probes or
        // signals a group that no longer exists (ESRCH).
        unsafe { libc::kill(-group, signal) == 0 }
    }

    /// Whether some member of the group is still alive (signal 0 probes without sending).
    fn group_alive(&self) -> bool {
        self.signal(0)
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.signal(libc::SIGTERM);
        let start = Instant::now();
        // The leader is reaped as soon as it ends, but the group id stays known: members left
        // (a daemon the leader started) are still reached.
        while start.elapsed() < self.grace {
            let _ = self.child.try_wait();
            if !self.group_alive() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.group_alive() {
            warn(&format!("{} did not stop within {:?}; killing it", self.what, self.grace));
            self.signal(libc::SIGKILL);
        }
        let _ = self.child.wait();
        // Members reparented to init are reaped by it; wait until they are gone.
        let start = Instant::now();
        while self.group_alive() && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An ext2 image mounted through a loop device (`mount -o loop`, whose loop device is freed by
/// the unmount), unmounted when dropped.
pub struct LoopMount {
    point: PathBuf,
}

impl LoopMount {
    /// Mounts `image` at `point`, which must exist.
    ///
    /// # Errors
    /// When `mount` refuses (no root, no loop devices).
    pub fn new(image: &Path, point: &Path) -> Result<LoopMount, String> {
        let mount = tool("mount", "mount")?;
        run(&mount, &["-t", "ext2", "-o", "loop", &image.to_string_lossy(), &point.to_string_lossy()])?;
        Ok(LoopMount { point: point.to_path_buf() })
    }

    /// The mount point.
    pub fn point(&self) -> &Path {
        &self.point
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let Ok(umount) = tool("umount", "mount") else { return };
        let point = self.point.to_string_lossy().into_owned();
        for _ in 0..50 {
            if run(&umount, &[&point]).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Still busy after 5 s: detach it now, Linux frees it (and the loop device) when the
        // last user goes.
        if let Err(e) = run(&umount, &["-l", &point]) {
            warn(&format!("cannot unmount {point}: {e}"));
        }
    }
}

/// A directory of the bench's own, in tmpfs (`/dev/shm`) where there is one, removed when
/// dropped — unless something is still mounted inside it, which is then left alone and named.
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Makes a new, empty directory `domos-bench-nfs-PID` (never reusing one).
    ///
    /// # Errors
    /// When it cannot be made.
    pub fn new() -> Result<ScratchDir, String> {
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let path = base.join(format!("domos-bench-nfs-{}", std::process::id()));
        std::fs::create_dir(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(ScratchDir { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let prefix = self.path.to_string_lossy();
        if mounts.lines().any(|line| line.split_whitespace().nth(4).is_some_and(|point| point.starts_with(&*prefix))) {
            warn(&format!("{} still has a mount inside; left in place", self.path.display()));
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            warn(&format!("cannot remove {}: {e}", self.path.display()));
        }
    }
}

/// Says on standard error what a guard could not undo. Never panics (`eprintln!` does when
/// standard error is closed): a panic inside a guard's `drop` while another unwinds would abort
/// and skip the guards still to run.
fn warn(what: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "domos bench nfs: {what}");
}

/// Whether the bench runs as root (namespaces, TAP cards and loop mounts need it).
pub fn is_root() -> bool {
    // SAFETY: `geteuid` takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
