//! Linux TAP devices, the backend of a `[[nic]]` with `tap = "IFNAME"`: the only `unsafe` code
//! of the kernel outside `guest_memory`, two system calls that std has no wrapper for — the
//! `TUNSETIFF` ioctl that binds a `/dev/net/tun` file to an interface, and `poll`, which lets the
//! card's thread wait, with a timeout so that it can stop, for a frame from Linux or for frames
//! to send. Frames are read and written through the `File`, one frame per call (`IFF_TAP |
//! IFF_NO_PI`: plain Ethernet frames, no header); the file is non-blocking, so that the thread
//! can look for a frame without sleeping.

use std::fs::File;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// An open TAP interface.
pub struct Tap {
    file: File,
    /// A pipe whose reading end [`Tap::wait`] watches as well: a byte written into it by
    /// [`Tap::wake`] ends the wait of the card's thread.
    wake_reader: PipeReader,
    wake_writer: PipeWriter,
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
        let (wake_reader, wake_writer) =
            std::io::pipe().map_err(|e| format!("tap {ifname}: cannot make a pipe to wake its thread: {e}"))?;
        Ok(Tap { file, wake_reader, wake_writer })
    }

    /// Waits up to `timeout_ms` for a frame to read or a [`Tap::wake`].
    ///
    /// # Errors
    /// What `poll` reports (an interrupted wait is no error).
    pub fn wait(&self, timeout_ms: i32) -> std::io::Result<()> {
        let watch = |fd: i32| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let mut fds = [watch(self.file.as_raw_fd()), watch(self.wake_reader.as_raw_fd())];
        // SAFETY: `fds` is an array of two valid `pollfd`s that lives across the call, and the
        // count is its length.
        let result = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if result < 0 {
            let error = std::io::Error::last_os_error();
            return if error.kind() == std::io::ErrorKind::Interrupted { Ok(()) } else { Err(error) };
        }
        if fds[1].revents & libc::POLLIN != 0 {
            // The pipe holds a byte or a few (one per wake while the thread slept): a read of a
            // readable pipe returns what it holds without waiting, and how much does not matter.
            let _taken = (&self.wake_reader).read(&mut [0u8; 64])?;
        }
        Ok(())
    }

    /// Ends a [`Tap::wait`] under way, or the next one.
    pub fn wake(&self) {
        let _ = (&self.wake_writer).write(&[1]);
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
