//! Linux TAP devices, the backend of a `[[nic]]` with `tap = "IFNAME"`: the only `unsafe` code
//! of the kernel outside `guest_memory`, two system calls that std has no wrapper for — the
//! `TUNSETIFF` ioctl that binds a `/dev/net/tun` file to an interface, and `poll`, which lets the
//! card's thread wait, with a timeout so that it can stop, for a frame from Linux or for frames
//! to send. Frames are read and written through the `File`, one frame per call, each after a
//! virtio-net header (`IFF_TAP | IFF_NO_PI | IFF_VNET_HDR`), by which a frame to send asks Linux
//! to take its TCP or UDP checksum as filled in (`domos_abi::nic`); the card asks for no
//! offloads, so Linux sends complete frames, and their headers say nothing. The file is
//! non-blocking, so that the thread can look for a frame without sleeping.

use std::fs::File;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use domos_abi::nic::ChecksumAt;

/// Bytes of the virtio-net header (`struct virtio_net_hdr`) before each frame.
pub const VNET_HEADER: usize = 10;
/// The header's flag that the checksum at `csum_start + csum_offset` is to be summed from
/// `csum_start` on (`VIRTIO_NET_HDR_F_NEEDS_CSUM`).
const NEEDS_CSUM: u8 = 1;

/// The virtio-net header of a frame to send: no segmentation, and the checksum `checksum`
/// asks for, if any (the fields are little-endian, as Linux takes them on this machine).
pub fn vnet_header(checksum: Option<ChecksumAt>) -> [u8; VNET_HEADER] {
    let mut header = [0u8; VNET_HEADER];
    if let Some(at) = checksum {
        header[0] = NEEDS_CSUM;
        header[6..8].copy_from_slice(&u16::from(at.start).to_le_bytes());
        header[8..10].copy_from_slice(&u16::from(at.offset).to_le_bytes());
    }
    header
}

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
        let flags = (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
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

    /// Reads one frame and its header into `buffer`; returns the frame (empty for a read shorter
    /// than a header).
    ///
    /// # Errors
    /// What `read` reports: `WouldBlock` when no frame is waiting.
    pub fn read<'b>(&self, buffer: &'b mut [u8]) -> std::io::Result<&'b [u8]> {
        let len = (&self.file).read(buffer)?;
        Ok(buffer.get(VNET_HEADER..len).unwrap_or_default())
    }

    /// Writes one frame after its header ([`vnet_header`]).
    ///
    /// # Errors
    /// What `write` reports (for example while the interface is down).
    pub fn write(&self, frame: &[u8]) -> std::io::Result<()> {
        (&self.file).write(frame).map(|_| ())
    }
}
