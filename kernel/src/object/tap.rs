//! Linux TAP devices, the backend of a `[[nic]]` with `tap = "IFNAME"`: the only `unsafe` code
//! of the kernel outside `guest_memory`, two system calls that std has no wrapper for — the
//! `TUNSETIFF` ioctl that binds a `/dev/net/tun` file to an interface, and `poll`, which lets the
//! receiving thread wait with a timeout so that it can stop. Frames are read and written through
//! the `File`, one frame per call (`IFF_TAP | IFF_NO_PI`: plain Ethernet frames, no header); the
//! file is non-blocking, so that the receiving thread can look for a frame without sleeping.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// An open TAP interface.
pub struct Tap {
    file: File,
}

impl Tap {
    /// Opens `/dev/net/tun` and attaches it to the TAP interface `ifname`, which Linux creates
    /// if it does not exist (that needs CAP_NET_ADMIN).
    ///
    /// # Errors
    /// A message naming the interface: no `/dev/net/tun`, no permission, a name in use by
    /// another kind of interface.
    pub fn open(ifname: &str) -> Result<Tap, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/net/tun")
            .map_err(|e| format!("tap {ifname}: cannot open /dev/net/tun: {e}"))?;
        let bytes = ifname.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(format!("tap {ifname}: not a Linux interface name"));
        }
        let mut name = [0 as libc::c_char; libc::IFNAMSIZ];
        for (to, from) in name.iter_mut().zip(bytes) {
            *to = *from as libc::c_char;
        }
        let flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        let mut request = libc::ifreq { ifr_name: name, ifr_ifru: libc::__c_anonymous_ifr_ifru { ifru_flags: flags } };
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, and `request` is a valid,
        // initialised `ifreq` that lives across the call; the descriptor is the open tun file.
        let result = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut request as *mut libc::ifreq) };
        if result < 0 {
            return Err(format!("tap {ifname}: TUNSETIFF failed: {}", std::io::Error::last_os_error()));
        }
        Ok(Tap { file })
    }

    /// Waits up to `timeout_ms` for a frame to read: whether one is there.
    ///
    /// # Errors
    /// What `poll` reports (an interrupted wait is no error: it reports no frame).
    pub fn wait_readable(&self, timeout_ms: i32) -> std::io::Result<bool> {
        let mut fd = libc::pollfd { fd: self.file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: `fd` is one valid `pollfd` that lives across the call, and the count is 1.
        let result = unsafe { libc::poll(&mut fd, 1, timeout_ms) };
        match result {
            r if r > 0 => Ok(fd.revents & libc::POLLIN != 0),
            0 => Ok(false),
            _ => {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted { Ok(false) } else { Err(error) }
            }
        }
    }

    /// Reads one frame into `buffer`; returns its length.
    ///
    /// # Errors
    /// What `read` reports: `WouldBlock` when no frame is waiting.
    pub fn read(&self, buffer: &mut [u8]) -> std::io::Result<usize> {
        (&self.file).read(buffer)
    }

    /// Writes one frame.
    ///
    /// # Errors
    /// What `write` reports (for example while the interface is down).
    pub fn write(&self, frame: &[u8]) -> std::io::Result<()> {
        (&self.file).write(frame).map(|_| ())
    }
}
