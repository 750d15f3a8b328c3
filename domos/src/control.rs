//! The control socket of a running `domos boot`, and the client side of `domos ps`, `kill`, `start`,
//! `trace`, `top` and `shutdown`.
//!
//! The socket is a Unix stream socket of mode 0600 in a directory only its owner can enter
//! (`$XDG_RUNTIME_DIR/domos/control`, else `/tmp/domos-UID/control`; `--control PATH` names
//! another), and the server also checks each client's uid (`SO_PEERCRED`). The protocol is one
//! request per connection: a line of text (at most [`MAX_REQUEST`] bytes, sent within
//! [`REQUEST_TIME`]), then a reply: `ok` and the body, or `error: MESSAGE`, one line. Requests:
//!
//! * `ps` (`ps cpu`: sorted by CPU time, most first) — the global scheduler, then one line per
//!   domain: id, parent, and the boot summary's report ([`DomainReport`]);
//! * `kill NAME` — terminates the live domain `NAME` and its children, reason
//!   [`KILL_REASON`]; the kernel's own `global-scheduler` domain is refused;
//! * `trace SECONDS` — records the thread activity trace for `SECONDS` (1 to
//!   [`MAX_TRACE_SECONDS`]) and replies with it as `domos boot --trace` writes it;
//! * `shutdown` — ends the boot's wait: it prints its summary and exits.
//!
//! The server runs on threads of the `domos` process, not on kernel CPUs: an acceptor and at
//! most [`MAX_CLIENTS`] connection threads; a connection beyond them is answered `error: busy`.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use domos_kernel::runtime::GLOBAL_SCHEDULER_DOMAIN;
use domos_kernel::trace::Event;
use domos_kernel::{DomainReport, Kernel};
use domos_loader::SystemConfig;

/// Bytes of a request at most, its newline included.
pub const MAX_REQUEST: usize = 4096;
/// Time a client has to send its whole request.
pub const REQUEST_TIME: Duration = Duration::from_secs(2);
/// Connections served at once; more are answered `error: busy`.
pub const MAX_CLIENTS: usize = 8;
/// The longest trace `domos trace` records.
pub const MAX_TRACE_SECONDS: u64 = 600;
/// The reason `domos ps` shows for a domain the operator killed.
pub const KILL_REASON: &str = "killed by the operator";
/// Bytes of a configuration fragment `start` reads at most.
pub const MAX_FRAGMENT: u64 = 256 * 1024;
/// Time a reply may take to be written to a client that does not read it.
const WRITE_TIME: Duration = Duration::from_secs(10);
/// How often the acceptor looks for connections and for the order to stop.
const POLL: Duration = Duration::from_millis(20);

/// The effective uid of this process.
fn uid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory of ours and cannot fail.
    unsafe { libc::geteuid() }
}

/// Where `domos boot` opens its control socket, and the other commands look for it, without
/// `--control`: `$XDG_RUNTIME_DIR/domos/control`, or `/tmp/domos-UID/control`.
pub fn default_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("domos").join("control"),
        _ => PathBuf::from(format!("/tmp/domos-{}", uid())).join("control"),
    }
}

/// A control socket bound and not yet served.
pub struct Bound {
    listener: UnixListener,
    path: PathBuf,
    /// The directory made for it, removed with it when empty.
    made_dir: Option<PathBuf>,
}

/// Binds the control socket at `path`: makes its directory (mode 0700) if missing, checks that
/// only this user can enter it, replaces a stale socket left by a `domos` that died, and makes
/// the socket mode 0600.
///
/// # Errors
/// A directory others can enter or owned by another user, a `domos` already serving at `path`,
/// a file there that is not a socket, or the OS refusing.
pub fn bind(path: &Path) -> Result<Bound, String> {
    let shown = path.display();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let made_dir = match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => Some(dir.clone()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => None,
        Err(e) => return Err(format!("control socket {shown}: cannot make its directory {}: {e}", dir.display())),
    };
    let meta =
        std::fs::symlink_metadata(&dir).map_err(|e| format!("control socket {shown}: {}: {e}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid() || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "control socket {shown}: its directory {} must be a directory of yours that only you can enter \
             (mode 0700; it has owner {} and mode {:o})",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    if let Ok(existing) = std::fs::symlink_metadata(path) {
        if !existing.file_type().is_socket() {
            return Err(format!("control socket {shown}: a file that is not a socket is in the way"));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "control socket {shown}: another domos is running there (stop it with `domos shutdown`, or give \
                 this one another socket with --control PATH)"
            ));
        }
        std::fs::remove_file(path).map_err(|e| format!("control socket {shown}: cannot remove a stale one: {e}"))?;
    }
    let listener = UnixListener::bind(path).map_err(|e| format!("control socket {shown}: {e}"))?;
    let bound = Bound { listener, path: path.to_path_buf(), made_dir };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("control socket {shown}: {e}"))?;
    bound.listener.set_nonblocking(true).map_err(|e| format!("control socket {shown}: {e}"))?;
    Ok(bound)
}

/// What the acceptor and connection threads share with the boot.
struct Shared {
    kernel: Arc<Kernel>,
    /// Set when the boot ends: the threads stop.
    stop: AtomicBool,
    /// Set by a `shutdown` request.
    shutdown: AtomicBool,
    /// Whether an operator's trace is being recorded.
    tracing: AtomicBool,
    /// The running system's configuration, with the domains `start` added; held while a
    /// `start` runs, so that two cannot take the same name.
    config: std::sync::Mutex<SystemConfig>,
}

/// A control socket being served; stops and removes the socket when dropped.
pub struct Control {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    path: PathBuf,
    made_dir: Option<PathBuf>,
}

impl Bound {
    /// Serves requests about `kernel`, which runs `config`, on a thread of this process until
    /// the [`Control`] is dropped.
    ///
    /// # Errors
    /// When the OS refuses a thread.
    pub fn serve(self, kernel: Arc<Kernel>, config: SystemConfig) -> Result<Control, String> {
        let shared = Arc::new(Shared {
            kernel,
            stop: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            tracing: AtomicBool::new(false),
            config: std::sync::Mutex::new(config),
        });
        let Bound { listener, path, made_dir } = self;
        let serving = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("domos-control".into())
            .spawn(move || accept(&listener, &serving))
            .map_err(|e| format!("control socket: cannot start its thread: {e}"))?;
        Ok(Control { shared, acceptor: Some(acceptor), path, made_dir })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Control {
    /// Whether an operator asked for a shutdown.
    pub fn shutdown_requested(&self) -> bool {
        self.shared.shutdown.load(Ordering::Acquire)
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = &self.made_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The acceptor: serves each connection on a thread of its own, at most [`MAX_CLIENTS`] at
/// once, until told to stop; then waits for the connection threads (each bounded in time).
fn accept(listener: &UnixListener, shared: &Arc<Shared>) {
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        clients.retain(|client| !client.is_finished());
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_write_timeout(Some(WRITE_TIME));
                if clients.len() >= MAX_CLIENTS {
                    // Without waiting for the client: the acceptor must go on.
                    let _ = stream.set_nonblocking(true);
                    reply(&stream, &Err(format!("busy: {MAX_CLIENTS} requests are being served, try again")));
                    continue;
                }
                let serving = shared.clone();
                match std::thread::Builder::new().name("domos-control-client".into()).spawn(move || {
                    serve(&stream, &serving);
                }) {
                    Ok(client) => clients.push(client),
                    Err(_) => std::thread::sleep(POLL),
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Out of descriptors, say: the running system goes on; try again shortly.
            Err(_) => std::thread::sleep(POLL),
        }
    }
    for client in clients {
        let _ = client.join();
    }
}

/// Serves one connection: checks the peer's uid, reads the request and replies.
fn serve(stream: &UnixStream, shared: &Shared) {
    let answer = match peer_uid(stream) {
        Ok(peer) if peer == uid() => read_request(stream).and_then(|request| execute(&request, shared)),
        Ok(peer) => Err(format!("permission denied: uid {peer} is not the owner of this domos")),
        Err(e) => Err(format!("cannot tell who is asking: {e}")),
    };
    reply(stream, &answer);
}

/// Writes `answer` as the protocol's reply.
fn reply(mut stream: &UnixStream, answer: &Result<String, String>) {
    let text = match answer {
        Ok(body) => format!("ok\n{body}"),
        Err(message) => format!("error: {}\n", message.replace('\n', " ")),
    };
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // Closing with unread bytes (a request refused unread, the rest of an over-long one) would
    // reset the connection, and the client could lose the reply: read what is there first, at
    // most [`MAX_DRAIN`] bytes for at most 200 ms, waiting at most 50 ms for each read (not at
    // all when the stream is non-blocking).
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let until = Instant::now() + Duration::from_millis(200);
    let mut drained = 0;
    let mut chunk = [0u8; 4096];
    while drained < MAX_DRAIN && Instant::now() < until {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Bytes read and dropped at most after a reply, before the connection is closed.
const MAX_DRAIN: usize = 64 * 1024;

/// The uid of the process at the other end of `stream`.
fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the descriptor is a connected Unix socket `stream` owns for the whole call; `cred`
    // and `len` are live locals, `len` holds the size of `cred`, and getsockopt writes at most
    // that many bytes into it.
    let result = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast::<libc::c_void>(),
            &raw mut len,
        )
    };
    if result != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Reads one request line: at most [`MAX_REQUEST`] bytes within [`REQUEST_TIME`], ended by a
/// newline or by the client closing its side.
fn read_request(mut stream: &UnixStream) -> Result<String, String> {
    let start = Instant::now();
    let mut request = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let left = REQUEST_TIME.checked_sub(start.elapsed()).filter(|left| !left.is_zero());
        let Some(left) = left else {
            return Err(format!("no complete request within {} s", REQUEST_TIME.as_secs()));
        };
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                request.extend_from_slice(&chunk[..n]);
                if let Some(end) = request.iter().position(|&b| b == b'\n') {
                    request.truncate(end);
                    break;
                }
                if request.len() >= MAX_REQUEST {
                    return Err(format!("request longer than {MAX_REQUEST} bytes"));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(format!("no complete request within {} s", REQUEST_TIME.as_secs()));
            }
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
    if request.len() >= MAX_REQUEST {
        return Err(format!("request longer than {MAX_REQUEST} bytes"));
    }
    String::from_utf8(request).map_err(|_| "the request is not UTF-8 text".to_string())
}

/// What the server answers to `request`.
fn execute(request: &str, shared: &Shared) -> Result<String, String> {
    // A domain's name or a path may hold spaces: the rest of the line is the argument.
    if let Some(name) = request.strip_prefix("kill ").map(str::trim).filter(|n| !n.is_empty()) {
        return kill(&shared.kernel, name);
    }
    if let Some(path) = request.strip_prefix("start ").map(str::trim).filter(|p| !p.is_empty()) {
        return start(shared, Path::new(path));
    }
    let words: Vec<&str> = request.split_whitespace().collect();
    match words.as_slice() {
        ["ps"] => Ok(ps(&shared.kernel, false)),
        ["ps", "cpu"] => Ok(ps(&shared.kernel, true)),
        ["trace", seconds] => {
            let seconds: u64 = seconds
                .parse()
                .ok()
                .filter(|s| (1..=MAX_TRACE_SECONDS).contains(s))
                .ok_or_else(|| format!("trace takes a number of seconds from 1 to {MAX_TRACE_SECONDS}"))?;
            trace(shared, seconds)
        }
        ["shutdown"] => {
            shared.shutdown.store(true, Ordering::Release);
            Ok("shutting down: the boot prints its summary and exits\n".into())
        }
        _ => {
            let shown: String = request.chars().take(40).collect();
            Err(format!(
                "unknown request {shown:?} (requests: ps, ps cpu, kill DOMAIN, trace SECONDS, start PATH, shutdown)"
            ))
        }
    }
}

/// `ps`: the global scheduler, then a line per domain (id, parent, the boot summary's report),
/// in creation order or by CPU time, most first.
pub fn ps(kernel: &Kernel, by_cpu: bool) -> String {
    let mut domains = kernel.domains();
    if by_cpu {
        domains.sort_by_key(|d| std::cmp::Reverse(d.cpu_ns()));
    }
    let mut text = format!("global scheduler {}\n", kernel.scheduler.describe_global());
    text += &format!("{:>4} {:<10} {:<10} {:<28} {}\n", "ID", "PARENT", "NAME", "COMPONENTS", "USE AND STATE");
    for domain in &domains {
        let parent = match domain.parent() {
            Some(parent) => parent.name.clone(),
            None if domain.is_child() => "(ended)".into(),
            None => "-".into(),
        };
        text += &format!("{:>4} {parent:<10} {}\n", domain.id, DomainReport::of(domain));
    }
    text
}

/// `kill NAME`: terminates the live domain `name` (its children end with it).
fn kill(kernel: &Kernel, name: &str) -> Result<String, String> {
    if name == GLOBAL_SCHEDULER_DOMAIN {
        return Err(format!("{name} is the kernel's own domain (it runs the global scheduler) and is not killed"));
    }
    let domains = kernel.domains();
    match domains.iter().find(|d| d.name == name && !d.is_terminated()) {
        Some(domain) => {
            kernel.terminate(domain, KILL_REASON.into());
            Ok(format!("killed {name} (id {})\n", domain.id))
        }
        None => match domains.iter().rev().find(|d| d.name == name) {
            Some(ended) => {
                Err(format!("domain {name} has already ended: {}", ended.termination_reason().unwrap_or_default()))
            }
            None => Err(format!("no domain named {name:?} (domos ps lists them)")),
        },
    }
}

/// `start PATH`: adds the domains of the fragment at `path` to the running system.
fn start(shared: &Shared, path: &Path) -> Result<String, String> {
    let shown = path.display();
    if !path.is_absolute() {
        return Err(format!("start takes an absolute path, not {shown}"));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_FRAGMENT + 1).read_to_string(&mut text))
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if text.len() as u64 > MAX_FRAGMENT {
        return Err(format!("{shown} is longer than {MAX_FRAGMENT} bytes"));
    }
    let fragment = SystemConfig::parse(&text).map_err(|e| format!("{shown}: {e}"))?;
    if !fragment.disks.is_empty() || !fragment.nics.is_empty() || !fragment.devices.is_empty() {
        return Err(format!("{shown}: start adds domains only; disks, network cards and devices are made at boot"));
    }
    if !fragment.files.is_empty() {
        return Err(format!(
            "{shown}: start runs the components the system has (embedded or loaded at boot); component files \
             are loaded at boot only"
        ));
    }
    if fragment.domains.is_empty() {
        return Err(format!("{shown}: no [[domain]] to start"));
    }
    let kernel = &shared.kernel;
    let mut running = crate::lock(&shared.config);
    let live = kernel.domains();
    for domain in &fragment.domains {
        if domain.name == GLOBAL_SCHEDULER_DOMAIN || live.iter().any(|d| d.name == domain.name && !d.is_terminated()) {
            return Err(format!("{shown}: the name {} is in use", domain.name));
        }
    }
    // Order the new domains together with the running ones, whose services they may require.
    let first = running.domains.len();
    let mut combined = running.clone();
    combined.domains.extend(fragment.domains.iter().cloned());
    let order = domos_loader::boot_order(&combined, kernel.components()).map_err(|e| format!("{shown}: {e}"))?;
    let mut started = Vec::new();
    for &d in order.iter().filter(|&&d| d >= first) {
        let domain = kernel.create_domain(&combined.domains[d]).map_err(|e| {
            format!(
                "{shown}: domain {}: {e} (started before it: {})",
                combined.domains[d].name,
                started_names(&started)
            )
        })?;
        started.push(domain);
    }
    let limit = Duration::from_millis(running.system.init_timeout_ms);
    let mut report = String::new();
    for domain in &started {
        if let Err(e) = kernel.run_init(domain, limit) {
            kernel.console.line("kernel", &e);
            report += &format!("{}: init failed: {e}\n", domain.name);
        }
    }
    for domain in started.iter().filter(|d| !d.is_terminated()) {
        kernel.start_main(domain);
        report += &format!("started {} (id {})\n", domain.name, domain.id);
    }
    running.domains.extend(fragment.domains);
    Ok(report)
}

/// The names of `domains`, for a message.
fn started_names(domains: &[Arc<domos_kernel::Domain>]) -> String {
    if domains.is_empty() {
        return "none".into();
    }
    domains.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// `trace SECONDS`: switches the thread activity trace on for `seconds` (less if the boot ends)
/// and returns what it recorded meanwhile, as [`crate::trace::chrome_json_of`] writes it.
fn trace(shared: &Shared, seconds: u64) -> Result<String, String> {
    if shared.tracing.swap(true, Ordering::AcqRel) {
        return Err("another operator's trace is being recorded; try again when it ends".into());
    }
    let trace = &shared.kernel.scheduler.trace;
    let was_on = trace.is_on();
    let (before, dropped_before) = trace.events();
    let from = before.len();
    drop(before);
    trace.switch_on();
    let end = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < end && !shared.stop.load(Ordering::Acquire) {
        std::thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
    }
    if !was_on {
        trace.switch_off();
    }
    let (events, dropped) = trace.events();
    shared.tracing.store(false, Ordering::Release);
    // The window's events, with the names of threads started before it.
    let window: Vec<Event> = events
        .into_iter()
        .enumerate()
        .filter(|(i, event)| *i >= from || matches!(event, Event::ThreadName { .. }))
        .map(|(_, event)| event)
        .collect();
    let domains: Vec<(u32, String)> = shared.kernel.domains().iter().map(|d| (d.id, d.name.clone())).collect();
    Ok(crate::trace::chrome_json_of(&window, dropped - dropped_before, &domains))
}

/// Sends `request` to the `domos boot` serving at `path` and returns the reply's body, waiting
/// at most `timeout` for it.
///
/// # Errors
/// No `domos` serving there, a reply that breaks the protocol or comes too late, or the
/// server's `error:` line.
pub fn request(path: &Path, request: &str, timeout: Duration) -> Result<String, String> {
    let stream = UnixStream::connect(path).map_err(|e| {
        format!(
            "no running domos answers at {} ({e}); start one with `domos boot`, or name its socket with --control PATH",
            path.display()
        )
    })?;
    let io = |e: std::io::Error| format!("control socket {}: {e}", path.display());
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    (&stream).write_all(format!("{request}\n").as_bytes()).map_err(io)?;
    let deadline = Instant::now() + timeout;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no reply from {} within {} s", path.display(), timeout.as_secs()));
        }
        stream.set_read_timeout(Some(left)).map_err(io)?;
        match (&stream).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // The server closed without reading all of the request, after its reply.
            Err(e) if e.kind() == ErrorKind::ConnectionReset && !reply.is_empty() => break,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(format!("no reply from {} within {} s", path.display(), timeout.as_secs()));
            }
            Err(e) => return Err(io(e)),
        }
    }
    let reply = String::from_utf8(reply).map_err(|_| format!("{}: the reply is not text", path.display()))?;
    if let Some(body) = reply.strip_prefix("ok\n") {
        Ok(body.to_string())
    } else if let Some(message) = reply.strip_prefix("error: ") {
        Err(message.trim_end().to_string())
    } else {
        Err(format!("{}: a reply that is not of the protocol", path.display()))
    }
}
