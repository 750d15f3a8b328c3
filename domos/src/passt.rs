//! The `passt` of a `[[nic]]` with `passt = { … }`: a user-mode network for a card, without
//! root or TAP. The `domos` command, not the kernel, starts one passt per such card before the
//! boot, in the foreground, with its socket in a private directory (mode 0700), and sets the
//! card's `stream` to that socket, which the kernel then connects to (`kernel/src/object/stream.rs`).
//!
//! What passt is told (Debian's passt 0.0~git20230309; `man passt`):
//!
//! - `-t 127.0.0.1/HOST:GUEST`, `-u …`: bind each forwarded host port on 127.0.0.1 only and carry
//!   what arrives there into the guest; `-t none` / `-u none` when a list is empty (otherwise
//!   passt forwards the TCP ports for UDP too).
//! - `-a`, `-n`, `-g`: the guest's address and prefix, and the gateway address on the guest's
//!   link that forwarded connections come from (passt rewrites their loopback source to it).
//! - not `--no-map-gw`: passt must map what the guest sends to the gateway address back to the
//!   host's loopback, or replies to forwarded UDP never reach the client (tried: they are lost).
//! - `-o 127.0.0.1`: any socket passt would open for the guest towards elsewhere is bound to
//!   the loopback address, so that Linux refuses to route it off the machine.
//! - `-4 --no-icmp --no-dhcp --no-ndp --no-dhcpv6 --no-ra`: IPv4 only, no pings forwarded out,
//!   none of passt's address-assignment services (the guest's address is in its configuration).
//! - `-f`: passt stays in the foreground, a child of `domos` that `Drop` kills and reaps; the
//!   terminal's Ctrl-C reaches it too (it is in the same process group). Not `-1` (quit after
//!   one client): this version of passt then quits at once, before any client connects.
//!
//! passt has no switch that refuses every connection the guest opens. The guest's stack, `net-ip`
//! without a `gateway=`, has no route off its link, and `-o 127.0.0.1` leaves what passt would
//! open for other addresses of that link bound to loopback; but a connection or datagram to the
//! gateway address reaches the host's 127.0.0.1, unless the stack runs `answer-only` (CAVEATS.md).

use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use domos_loader::SystemConfig;
use domos_loader::nic::{NicBackend, PasstConfig};

/// The uid and gid passt runs as when root starts it (Debian's nobody and nogroup).
const NOBODY: u32 = 65534;
/// The most of passt's messages kept, for the error that says why it failed.
const LOG_LIMIT: usize = 16 * 1024;
/// How long passt may take to bind its socket.
const START_LIMIT: Duration = Duration::from_secs(10);

/// A running passt, killed and its directory removed when dropped.
pub struct Passt {
    child: Child,
    directory: PathBuf,
    /// What it forwards, for people: `nic eth0: tcp 127.0.0.1:20049 -> 10.0.2.15:2049, …`.
    pub description: String,
}

impl Drop for Passt {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// Starts a passt for every card of `config` with `passt = { … }` and no `stream` yet, and sets
/// the card's `stream` to its socket. Boot `config` while the returned values live.
///
/// # Errors
/// No passt installed, a directory that cannot be made, a passt that exits or does not bind its
/// socket in time (with what it logged: a host port in use, or below 1024 without root). The
/// passts started before the failure are stopped.
pub fn start(config: &mut SystemConfig) -> Result<Vec<Passt>, String> {
    let mut started = Vec::new();
    for nic in &mut config.nics {
        let (NicBackend::Passt, Some(table)) = (nic.backend(), &nic.passt) else {
            continue;
        };
        let passt = start_one(&nic.name, table)?;
        nic.stream = Some(socket_path(&passt.directory).to_string_lossy().into_owned());
        started.push(passt);
    }
    Ok(started)
}

/// The passt program: in `PATH`, else in `/usr/bin`.
fn program() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("passt"))
        .find(|file| file.is_file())
}

fn socket_path(directory: &Path) -> PathBuf {
    directory.join("passt.socket")
}

/// The arguments that make passt serve the card `table` describes on `socket`.
///
/// # Errors
/// A table [`PasstConfig::check`] would refuse.
pub fn arguments(table: &PasstConfig, socket: &Path) -> Result<Vec<String>, String> {
    let (guest, prefix) = table.guest()?;
    let gateway = table.gateway()?;
    let mut args: Vec<String> =
        ["-f", "-4", "--no-icmp", "--no-dhcp", "--no-ndp", "--no-dhcpv6", "--no-ra", "-o", "127.0.0.1"]
            .map(String::from)
            .into();
    args.extend(["-a".into(), guest.to_string(), "-n".into(), prefix.to_string(), "-g".into(), gateway.to_string()]);
    args.extend(["-s".into(), socket.to_string_lossy().into_owned()]);
    for (flag, forwards) in [("-t", &table.tcp), ("-u", &table.udp)] {
        if forwards.is_empty() {
            args.extend([flag.to_string(), "none".into()]);
        }
        for forward in forwards {
            let (host, guest) = forward.ports()?;
            args.extend([flag.to_string(), format!("127.0.0.1/{host}:{guest}")]);
        }
    }
    Ok(args)
}

/// What `table` forwards, for people.
fn describe(name: &str, table: &PasstConfig) -> String {
    let guest = table.guest().map(|(address, _)| address.to_string()).unwrap_or_default();
    let mut forwards = Vec::new();
    for (protocol, list) in [("tcp", &table.tcp), ("udp", &table.udp)] {
        for (host, to) in list.iter().filter_map(|f| f.ports().ok()) {
            forwards.push(format!("{protocol} 127.0.0.1:{host} -> {guest}:{to}"));
        }
    }
    if forwards.is_empty() {
        forwards.push("no ports".into());
    }
    format!("nic {name}: passt forwards {}", forwards.join(", "))
}

fn start_one(name: &str, table: &PasstConfig) -> Result<Passt, String> {
    let program = program().ok_or_else(|| {
        format!("nic {name}: passt is not installed (Debian package passt), and a passt card needs it")
    })?;
    let directory = private_directory().map_err(|e| format!("nic {name}: cannot make a directory for passt: {e}"))?;
    let socket = socket_path(&directory);
    let mut args = arguments(table, &socket)?;
    // Started by root, passt becomes nobody before it binds its socket: the directory is then
    // nobody's (still closed to every other user), and passt is told so rather than guessing.
    let by_root = std::fs::metadata(&directory).map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    if by_root.unwrap_or(false) {
        if let Err(e) = std::os::unix::fs::chown(&directory, Some(NOBODY), Some(NOBODY)) {
            let _ = std::fs::remove_dir_all(&directory);
            return Err(format!("nic {name}: cannot hand passt's directory to uid {NOBODY}: {e}"));
        }
        args.extend(["--runas".into(), format!("{NOBODY}:{NOBODY}")]);
    }
    let child = Command::new(&program)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("nic {name}: cannot start {}: {e}", program.display()));
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&directory);
            return Err(e);
        }
    };
    let log = Arc::new(Mutex::new(String::new()));
    if let Some(stderr) = child.stderr.take() {
        let log = log.clone();
        // Ends when passt does (its stderr closes).
        let _ = std::thread::Builder::new().name("domos-passt-log".into()).spawn(move || keep_log(stderr, &log));
    }
    let description = format!("{} (passt pid {})", describe(name, table), child.id());
    let mut passt = Passt { child, directory, description };
    let logged = || log.lock().map(|text| text.trim().to_string()).unwrap_or_default();
    let start = Instant::now();
    // The socket file appears at bind; passt says "bound" once it listens (and also when its
    // bind failed, hence both).
    while !(socket.exists() && logged().contains("bound")) {
        if let Ok(Some(status)) = passt.child.try_wait() {
            return Err(format!("nic {name}: passt ended ({status}) before it served the card: {}", logged()));
        }
        if start.elapsed() > START_LIMIT {
            return Err(format!(
                "nic {name}: passt did not bind its socket {} in {START_LIMIT:?}: {}",
                socket.display(),
                logged()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(passt)
}

/// Keeps the first [`LOG_LIMIT`] bytes of what passt writes to `stderr` in `log`, without its
/// complaints that it has no system logger, and reads the rest to nowhere.
fn keep_log(stderr: impl Read, log: &Mutex<String>) {
    for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
        if line.contains("to syslog") {
            continue;
        }
        if let Ok(mut text) = log.lock()
            && text.len() + line.len() < LOG_LIMIT
        {
            text.push_str(&line);
            text.push('\n');
        }
    }
}

/// A new directory only this user can enter, under the system's temporary directory.
fn private_directory() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let mut error = None;
    for attempt in 0..100u32 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let directory = base.join(format!("domos-passt-{}-{nanos:x}-{attempt}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&directory) {
            Ok(()) => return Ok(directory),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(error.unwrap_or_else(|| std::io::Error::other("no free name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passt_is_told_to_forward_from_loopback_only_and_to_assign_nothing() {
        let config = SystemConfig::parse(
            "[[nic]]\nname = \"eth0\"\npasst = { tcp = [2049, \"20111:111\"] }\n\
             [[domain]]\nname = \"A\"\n[[domain.component]]\nname = \"x\"",
        )
        .expect("parses");
        let table = config.nics[0].passt.as_ref().expect("a passt table");
        let args = arguments(table, Path::new("/d/s")).expect("arguments").join(" ");
        for expected in [
            "-t 127.0.0.1/2049:2049 -t 127.0.0.1/20111:111 -u none",
            "-a 10.0.2.15 -n 24 -g 10.0.2.2",
            "-o 127.0.0.1",
            "--no-dhcp",
            "-s /d/s",
        ] {
            assert!(args.contains(expected), "{expected} in {args}");
        }
        assert_eq!(
            describe("eth0", table),
            "nic eth0: passt forwards tcp 127.0.0.1:2049 -> 10.0.2.15:2049, tcp 127.0.0.1:20111 -> 10.0.2.15:111"
        );
    }
}
