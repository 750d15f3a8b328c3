//! The baseline: nfs-ganesha 4.3 (FSAL VFS) serving a copy of the bench's ext2 image,
//! loop-mounted, over NFSv3 on the loopback of a network namespace of its own, with `rpcbind`.
//!
//! What this machine taught (turn 2 and this suite): ganesha registers with rpcbind and serves
//! inside a namespace only with `rpcbind -f` running there and `Bind_addr` unset
//! (`rpcbind -h 127.0.0.1` crashes); rpcbind keeps its socket and lock in `/run`, so both run
//! under one `ip netns exec` (which gives them a mount namespace of their own) with a private
//! tmpfs on `/run` — otherwise they would meet the host's rpcbind, or another bench's; ganesha
//! writes NFSv4 recovery directories under `/var/lib/nfs/ganesha` even when serving only NFSv3,
//! so `RecoveryRoot` points into the bench's scratch directory; it takes 5–10 s to stop.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::host::{self, LoopMount, Namespace, ProcessGroup};

/// Where the export is seen by NFSv4 clients (its pseudo path); NFSv3 clients mount its path.
pub const EXPORT: &str = "/export";

/// How long ganesha may take to start serving.
const START_LIMIT: Duration = Duration::from_secs(30);

/// How long ganesha may take to stop before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(12);

/// nfs-ganesha and rpcbind running in their namespace; dropping it stops them, unmounts the
/// image and deletes the namespace, in that order.
pub struct Ganesha {
    // Fields drop in this order: the servers, then the mount they hold busy, then the namespace.
    servers: ProcessGroup,
    mount: LoopMount,
    namespace: Namespace,
    log: PathBuf,
}

impl Ganesha {
    /// Whether nfs-ganesha can run here: root, `ganesha.nfsd` with FSAL VFS, `rpcbind`, `ip`.
    ///
    /// # Errors
    /// What is missing, with the package that has it.
    pub fn check() -> Result<(), String> {
        if !host::is_root() {
            return Err("the baseline needs root: network namespaces, a loop mount and nfs-ganesha".into());
        }
        host::tool("ganesha.nfsd", "nfs-ganesha")?;
        host::tool("rpcbind", "rpcbind")?;
        host::tool("ip", "iproute2")?;
        fsal_dir().map(|_| ())
    }

    /// Loop-mounts `image` (a copy the caller made for ganesha alone) under `scratch`, writes
    /// the configuration there and starts rpcbind and ganesha in the namespace `namespace`;
    /// returns once ganesha says it serves.
    ///
    /// # Errors
    /// When a step fails; the log's last lines are part of the message.
    pub fn start(image: &Path, scratch: &Path, namespace: String) -> Result<Ganesha, String> {
        Self::check()?;
        let dir = scratch.join("ganesha");
        let point = dir.join("export");
        for path in [&dir, &point, &dir.join("recovery")] {
            std::fs::create_dir_all(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        }
        let mount = LoopMount::new(image, &point)?;
        let config = dir.join("ganesha.conf");
        std::fs::write(&config, configuration(mount.point(), &dir, &fsal_dir()?))
            .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        let namespace = Namespace::new(namespace)?;
        let log = dir.join("ganesha.log");
        let (rpcbind, ganesha) = (host::tool("rpcbind", "rpcbind")?, host::tool("ganesha.nfsd", "nfs-ganesha")?);
        // One shell under `ip netns exec`, so that rpcbind and ganesha share its private /run.
        let script = format!(
            "mount -t tmpfs -o size=1m,mode=0755 domos-bench-run /run && mkdir -p /run/rpcbind && \
             (chown _rpc /run/rpcbind 2>/dev/null; true) && {} -f & \
             sleep 0.3; exec {} -F -f {} -L {} -p {} -N NIV_EVENT",
            rpcbind.display(),
            ganesha.display(),
            config.display(),
            log.display(),
            dir.join("ganesha.pid").display()
        );
        let mut command = namespace.command(Path::new("/bin/sh"));
        command.args(["-c", &script]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        let servers = ProcessGroup::spawn(command, "nfs-ganesha and rpcbind", STOP_GRACE)?;
        let mut ganesha = Ganesha { servers, mount, namespace, log };
        ganesha.wait_started()?;
        Ok(ganesha)
    }

    /// The directory it exports, the path NFSv3 clients MOUNT.
    pub fn export(&self) -> &Path {
        self.mount.point()
    }

    /// The namespace it serves in, at 127.0.0.1.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// Waits for ganesha's "NFS SERVER INITIALIZED" and for rpcbind to know its NFS service.
    fn wait_started(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let rpcinfo = host::tool("rpcinfo", "rpcbind").ok();
        loop {
            host::check_interrupted()?;
            if let Some(status) = self.servers.exited() {
                return Err(format!("nfs-ganesha ended at start ({status}){}", self.log_tail()));
            }
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if log.contains("NFS SERVER INITIALIZED") {
                let registered = match &rpcinfo {
                    Some(rpcinfo) => {
                        let rpcinfo = rpcinfo.to_string_lossy().into_owned();
                        self.namespace.run_inside(&[&rpcinfo, "-p", "127.0.0.1"]).is_ok_and(|out| {
                            out.lines().any(|l| l.contains("100003") && l.contains("udp"))
                                && out.lines().any(|l| l.contains("100005") && l.contains("tcp"))
                        })
                    }
                    None => true,
                };
                if registered {
                    return Ok(());
                }
            }
            if start.elapsed() > START_LIMIT {
                return Err(format!("nfs-ganesha did not start serving within {START_LIMIT:?}{}", self.log_tail()));
            }
            host::sleep(Duration::from_millis(100))?;
        }
    }

    /// The last lines of ganesha's log that say something went wrong, for error messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| {
                (l.contains(":CRIT :") || l.contains(":FATAL :") || l.contains(":MAJ :")) && !l.contains("DBUS")
            })
            .collect();
        if bad.is_empty() {
            return String::new();
        }
        format!("; its log ({}) says:\n  {}", self.log.display(), bad[bad.len().saturating_sub(5)..].join("\n  "))
    }
}

/// The directory of ganesha's FSAL plugins that holds FSAL VFS.
fn fsal_dir() -> Result<PathBuf, String> {
    [
        "/usr/lib/x86_64-linux-gnu/ganesha",
        "/usr/lib/aarch64-linux-gnu/ganesha",
        "/usr/lib64/ganesha",
        "/usr/lib/ganesha",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|dir| dir.join("libfsalvfs.so").exists())
    .ok_or_else(|| "nfs-ganesha's FSAL VFS is not installed (Debian package nfs-ganesha-vfs)".to_string())
}

/// ganesha's configuration: NFSv3 only, over UDP and TCP, on every address of its namespace
/// (no `Bind_addr`: with one set it does not serve there), no NLM or RQUOTA, one export of
/// `export` as `/export`, read-write, no squashing; recovery state inside `dir`.
fn configuration(export: &Path, dir: &Path, plugins: &Path) -> String {
    format!(
        "# Written by domos bench nfs for one run.\n\
         NFS_CORE_PARAM {{\n  Protocols = 3;\n  Enable_NLM = false;\n  Enable_RQUOTA = false;\n  \
         Plugins_Dir = \"{plugins}\";\n}}\n\
         NFSv4 {{\n  RecoveryBackend = fs;\n  RecoveryRoot = \"{recovery}\";\n  Graceless = true;\n}}\n\
         EXPORT {{\n  Export_Id = 1;\n  Path = \"{export}\";\n  Pseudo = \"{EXPORT}\";\n  Protocols = 3;\n  \
         Transports = UDP, TCP;\n  Access_Type = RW;\n  Squash = None;\n  SecType = sys;\n  \
         FSAL {{\n    Name = VFS;\n  }}\n}}\n\
         LOG {{\n  Default_Log_Level = EVENT;\n}}\n",
        plugins = plugins.display(),
        recovery = dir.join("recovery").display(),
        export = export.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_serves_nfsv3_only_and_keeps_state_in_the_scratch_directory() {
        let text = configuration(Path::new("/s/ganesha/export"), Path::new("/s/ganesha"), Path::new("/p"));
        assert!(text.contains("Protocols = 3;"));
        assert!(text.contains("Path = \"/s/ganesha/export\";") && text.contains("Pseudo = \"/export\";"));
        assert!(text.contains("RecoveryRoot = \"/s/ganesha/recovery\";"));
        assert!(text.contains("Squash = None;"));
        assert!(!text.contains("Bind_addr"), "with Bind_addr set ganesha does not serve in a namespace");
    }
}
