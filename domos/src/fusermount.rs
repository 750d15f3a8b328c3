//! The `[[fuse]]` devices of a process without root, mounted the way libfuse does: the setuid
//! helper `fusermount3` (Debian's fuse3) opens `/dev/fuse`, mounts it at a directory the user may
//! write for that user, and hands the open descriptor back over a Unix socket, whose number it
//! finds in the environment variable `_FUSE_COMMFD`, as an `SCM_RIGHTS` message. The `domos`
//! command, not the kernel, runs the helper (as it starts `passt`), and hands the kernel the
//! connection before the boot (`Kernel::adopt_fuse`); root's connections the kernel mounts itself.
//!
//! Dropping a [`Fusermount`] unmounts with `fusermount3 -u -z` (lazily, as the user may). The
//! mount also asks for `auto_unmount`: the helper then stays, a child of this process, until its
//! end of the socket closes, and unmounts the directory if the connection is gone by then, so
//! that a process killed outright leaves no dead mount. fuse3 before 3.15 (Debian 12 has 3.14)
//! looks at the directory as root, which a mount without `allow_other` refuses, and so leaves
//! the mount (libfuse issue 586); with `allow_other`, or a newer fuse3, it unmounts.
//!
//! `allow_other` (every user reaches the files) is asked for only when `/etc/fuse.conf` has
//! `user_allow_other`, without which the helper refuses it; otherwise only the mounting user
//! does. The `recvmsg` call and the `fcntl` in the child before `exec` are this file's `unsafe`
//! code.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use domos_kernel::Kernel;
use domos_loader::SystemConfig;

/// The helper's name, looked for in the system directories (a setuid helper, not one of `PATH`).
const HELPER: &str = "fusermount3";
/// How long the helper may take to mount, and later to unmount and end.
const LIMIT: Duration = Duration::from_secs(10);
/// The most of the helper's messages kept for an error.
const MESSAGE_LIMIT: u64 = 4096;

/// Mounts every `[[fuse]]` of `config` through `fusermount3` and hands each connection to
/// `kernel` for the boot of `config`, unless this process is root (then the kernel mounts).
///
/// # Errors
/// What [`Fusermount::mount`] reports, naming the device; those mounted before are unmounted
/// with the kernel's shutdown.
pub fn mount_for_user(kernel: &Kernel, config: &SystemConfig) -> Result<(), String> {
    if crate::host::is_root() {
        return Ok(());
    }
    for fuse in &config.fuses {
        let (helper, device) = Fusermount::mount(&fuse.mountpoint, "default_permissions")
            .map_err(|why| format!("fuse {}: cannot mount at {}: {why}", fuse.name, fuse.mountpoint))?;
        kernel.adopt_fuse(&fuse.name, device, Box::new(move || drop(helper)));
    }
    Ok(())
}

/// A connection mounted by `fusermount3`, which unmounts it when this is dropped.
pub struct Fusermount {
    program: PathBuf,
    mountpoint: String,
    helper: Child,
    socket: Option<UnixStream>,
}

impl Fusermount {
    /// Mounts a new FUSE connection of type `fuse.domos` at `mountpoint` for this process's
    /// user, with `options` (comma-separated, besides the ones this module adds); the helper and
    /// the connection.
    ///
    /// # Errors
    /// No `fusermount3`, or what it said when it refused (a directory the user may not write, an
    /// option `/etc/fuse.conf` does not allow, no `/dev/fuse`).
    pub fn mount(mountpoint: &str, options: &str) -> Result<(Fusermount, File), String> {
        let program = crate::host::tool(HELPER, "fuse3")?;
        let mut options = format!("fsname=domos,subtype=domos,auto_unmount,{options}");
        if others_allowed() {
            options.push_str(",allow_other");
        }
        let (socket, helpers_end) = UnixStream::pair().map_err(|e| format!("a socket for {HELPER}: {e}"))?;
        socket.set_read_timeout(Some(LIMIT)).map_err(|e| format!("a socket for {HELPER}: {e}"))?;
        let passed = helpers_end.as_raw_fd();
        let mut command = Command::new(&program);
        command
            .args(["-o", &options, "--", mountpoint])
            .env("_FUSE_COMMFD", passed.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: the closure runs in the forked child before `exec` and only calls `fcntl`,
        // which is async-signal-safe, on a descriptor number it owns by value; `helpers_end`
        // is open in the parent until after `spawn` returns, so the number names the socket.
        unsafe {
            command.pre_exec(move || {
                // Keep the helper's end of the socket open across `exec` (Rust opens it
                // close-on-exec).
                if libc::fcntl(passed, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut helper = command.spawn().map_err(|e| format!("{}: {e}", program.display()))?;
        // Only the helper holds its end now, so the socket ends when the helper does.
        drop(helpers_end);
        match receive_descriptor(&socket) {
            Ok(Some(device)) => {
                let mountpoint = mountpoint.to_string();
                Ok((Fusermount { program, mountpoint, helper, socket: Some(socket) }, File::from(device)))
            }
            outcome => {
                let _ = helper.kill();
                let mut said = String::new();
                if let Some(stderr) = helper.stderr.take() {
                    let _ = stderr.take(MESSAGE_LIMIT).read_to_string(&mut said);
                }
                let _ = helper.wait();
                let why = match outcome {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        format!("no answer within {} s", LIMIT.as_secs())
                    }
                    Err(e) => e.to_string(),
                    _ => said.trim().to_string(),
                };
                Err(format!("{HELPER}: {why}"))
            }
        }
    }
}

impl Drop for Fusermount {
    /// Unmounts (quietly: the directory may be unmounted already), then closes the socket, on
    /// which the helper ends; waits for each at most [`LIMIT`].
    fn drop(&mut self) {
        let unmount = Command::new(&self.program)
            .args(["-u", "-z", "-q", "--", &self.mountpoint])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Ok(mut unmount) = unmount {
            end(&mut unmount);
        }
        drop(self.socket.take());
        end(&mut self.helper);
    }
}

/// Waits at most [`LIMIT`] for `child` to end, then kills it.
fn end(child: &mut Child) {
    let deadline = Instant::now() + LIMIT;
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether `/etc/fuse.conf` lets users mount with `allow_other`.
fn others_allowed() -> bool {
    std::fs::read_to_string("/etc/fuse.conf")
        .is_ok_and(|conf| conf.lines().any(|line| line.trim() == "user_allow_other"))
}

/// The descriptor the helper sends over `socket`, or `None` when it ends the socket without one.
fn receive_descriptor(socket: &UnixStream) -> std::io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut data = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: byte.len() };
    // Room for one control message carrying one descriptor, aligned as a `cmsghdr`.
    let mut control = [0u64; 8];
    loop {
        // SAFETY: all zeros is a valid `msghdr` (null pointers, zero lengths).
        let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
        message.msg_iov = &mut data;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: `message` points at `data` (which points at `byte`) and at `control`, all
        // locals alive across the call, with their true lengths; the socket is open (borrowed).
        let received = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
        if received < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        // SAFETY: `message` is the header `recvmsg` filled in, its control buffer `control`
        // still alive; CMSG_FIRSTHDR returns null or a header inside that buffer, and
        // CMSG_DATA of a header whose length covers one `c_int` points at that `c_int`,
        // inside the buffer too (read unaligned, as the macro promises no alignment).
        let descriptor = unsafe {
            let header = libc::CMSG_FIRSTHDR(&message);
            let one = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
            if header.is_null()
                || (*header).cmsg_level != libc::SOL_SOCKET
                || (*header).cmsg_type != libc::SCM_RIGHTS
                || (*header).cmsg_len < one
            {
                return Ok(None);
            }
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<libc::c_int>());
            // The kernel installed `fd` in this process for us alone: it is ours to own.
            OwnedFd::from_raw_fd(fd)
        };
        return Ok(Some(descriptor));
    }
}
