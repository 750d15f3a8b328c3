//! Stream sockets, the backend of a `[[nic]]` with `stream = "PATH"` (and of a `passt` card,
//! whose passt the `domos` command starts and hands over as a stream): QEMU's stream protocol on
//! a Unix socket, each frame preceded by its length as a 4-byte big-endian number. No `unsafe`:
//! a read timeout lets the receiving thread see that it must stop, and a write timeout bounds how
//! long a transmit waits for a peer that does not read.
//!
//! A peer that breaks the protocol — a length shorter than an Ethernet header or longer than any
//! IPv4 packet in a frame, a frame cut off by the end of the stream, a write that does not finish
//! in time — loses the connection, with a line on the console saying why; the card then carries
//! nothing, as a card whose cable was pulled. Frames longer than the card's MTU but within the
//! protocol are read and then dropped by the card, as a card drops giant frames.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::nic::ETHERNET_HEADER;

/// The longest frame the protocol may carry: the longest IPv4 packet and an Ethernet header.
pub const MAX_STREAM_FRAME: usize = 65_535 + ETHERNET_HEADER as usize;
/// How long the receiving thread waits for data before it looks whether it must stop.
const READ_TIMEOUT: Duration = Duration::from_millis(100);
/// How long a transmit waits for the peer to take a frame before the connection is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// A connected stream socket.
pub struct Stream {
    socket: UnixStream,
    /// Held across the write of one frame, so that frames of concurrent transmits do not mix.
    writing: Mutex<()>,
    /// Set once the connection is dropped: nothing is read or written after.
    broken: AtomicBool,
}

impl Stream {
    /// Connects to the Unix socket `path`.
    ///
    /// # Errors
    /// A message naming the path: no such socket, nobody listening, no permission.
    pub fn connect(path: &str) -> Result<Stream, String> {
        let socket =
            UnixStream::connect(path).map_err(|e| format!("cannot connect to the stream socket {path}: {e}"))?;
        socket
            .set_read_timeout(Some(READ_TIMEOUT))
            .and_then(|()| socket.set_write_timeout(Some(WRITE_TIMEOUT)))
            .map_err(|e| format!("stream socket {path}: {e}"))?;
        Ok(Stream { socket, writing: Mutex::new(()), broken: AtomicBool::new(false) })
    }

    /// Writes one frame, its length first.
    ///
    /// # Errors
    /// A message when the connection is, or now gets, dropped: the peer closed it or did not
    /// take the frame within a second (a partly written frame leaves the stream out of step).
    pub fn write_frame(&self, frame: &[u8]) -> Result<(), String> {
        if self.broken.load(Ordering::Acquire) {
            return Err(String::new());
        }
        let mut message = Vec::with_capacity(frame.len() + 4);
        message.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        message.extend_from_slice(frame);
        let _writing = crate::lock(&self.writing);
        (&self.socket).write_all(&message).map_err(|e| self.drop_connection(&format!("cannot send a frame: {e}")))
    }

    /// Reads the next frame into `buffer` (at least [`MAX_STREAM_FRAME`] bytes); returns its
    /// length, or `None` once `stopped` is set.
    ///
    /// # Errors
    /// A message when the connection is dropped: a bad length, the end of the stream, a failed
    /// read. Nothing is read after.
    pub fn read_frame(&self, buffer: &mut [u8], stopped: &AtomicBool) -> Result<Option<usize>, String> {
        if self.broken.load(Ordering::Acquire) {
            return Err(String::new());
        }
        read_frame(&mut &self.socket, buffer, &|| stopped.load(Ordering::Acquire)).map_err(|e| self.drop_connection(&e))
    }

    /// Drops the connection (the peer sees its end); returns `why`, for the console.
    fn drop_connection(&self, why: &str) -> String {
        self.broken.store(true, Ordering::Release);
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        format!("{why}; connection dropped")
    }

    /// Closes the connection, as the kernel stops.
    pub fn close(&self) {
        self.broken.store(true, Ordering::Release);
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

/// Reads one frame of the stream protocol from `reader` into `buffer`: its length, or `None`
/// when `stopped()` turns true while waiting (reads that time out are retried).
///
/// # Errors
/// A message for a length below an Ethernet header or above [`MAX_STREAM_FRAME`] (or above the
/// buffer), a stream that ends, cleanly or within a frame, and a failed read.
pub fn read_frame(
    reader: &mut impl Read,
    buffer: &mut [u8],
    stopped: &dyn Fn() -> bool,
) -> Result<Option<usize>, String> {
    let mut header = [0u8; 4];
    match fill(reader, &mut header, stopped, true)? {
        Filled::Stopped => return Ok(None),
        Filled::Ended => return Err("the peer closed the stream".into()),
        Filled::Whole => {}
    }
    let len = u32::from_be_bytes(header) as usize;
    if len < ETHERNET_HEADER as usize || len > MAX_STREAM_FRAME.min(buffer.len()) {
        return Err(format!("bad frame length {len} (a frame has {ETHERNET_HEADER} to {MAX_STREAM_FRAME} bytes)"));
    }
    match fill(reader, &mut buffer[..len], stopped, false)? {
        Filled::Stopped => Ok(None),
        Filled::Ended => Err(format!("the stream ended within a frame of {len} bytes")),
        Filled::Whole => Ok(Some(len)),
    }
}

/// How [`fill`] ended.
enum Filled {
    Whole,
    Stopped,
    /// The stream ended (in the middle of `to`, unless it was at its start).
    Ended,
}

/// Fills `to` from `reader`, retrying reads that time out until `stopped()`; at the start of a
/// frame (`boundary`), an end of stream before the first byte is `Ended` too.
fn fill(reader: &mut impl Read, to: &mut [u8], stopped: &dyn Fn() -> bool, boundary: bool) -> Result<Filled, String> {
    let mut got = 0;
    while got < to.len() {
        if stopped() {
            return Ok(Filled::Stopped);
        }
        match reader.read(&mut to[got..]) {
            Ok(0) if got == 0 && boundary => return Ok(Filled::Ended),
            Ok(0) if boundary => return Err(format!("the stream ended within a length word ({got} of 4 bytes)")),
            Ok(0) => return Ok(Filled::Ended),
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(format!("cannot read from the stream: {e}")),
        }
    }
    Ok(Filled::Whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8]) -> Vec<Result<Option<usize>, String>> {
        let mut reader = bytes;
        let mut buffer = vec![0u8; MAX_STREAM_FRAME];
        let mut out = Vec::new();
        for _ in 0..8 {
            let result = read_frame(&mut reader, &mut buffer, &|| false);
            let end = result.is_err();
            out.push(result);
            if end {
                break;
            }
        }
        out
    }

    fn framed(len: u32, body: usize) -> Vec<u8> {
        let mut bytes = len.to_be_bytes().to_vec();
        bytes.resize(4 + body, 0xab);
        bytes
    }

    #[test]
    fn stream_frames_are_read_and_bad_lengths_end_the_stream() {
        let two = [framed(60, 60), framed(14, 14)].concat();
        assert_eq!(frames(&two), [Ok(Some(60)), Ok(Some(14)), Err("the peer closed the stream".into())]);
        let bad = |bytes: &[u8], why: &str| {
            let results = frames(bytes);
            let last = results.last().cloned().unwrap_or(Ok(None));
            assert!(last.as_ref().is_err_and(|e| e.contains(why)), "{why}: {results:?}");
        };
        bad(&framed(0, 0), "bad frame length 0");
        bad(&framed(13, 13), "bad frame length 13");
        bad(&framed(65_550, 0), "bad frame length 65550");
        bad(&framed(u32::MAX, 0), "bad frame length 4294967295");
        bad(&framed(100, 99), "ended within a frame of 100 bytes");
        bad(&[0, 0], "within a length word (2 of 4 bytes)");
        let mut longest = framed(MAX_STREAM_FRAME as u32, MAX_STREAM_FRAME);
        longest.extend_from_slice(&framed(1, 1));
        let results = frames(&longest);
        assert_eq!(results[0], Ok(Some(MAX_STREAM_FRAME)), "the longest frame is read whole");
        assert!(results[1].as_ref().is_err_and(|e| e.contains("bad frame length 1")));
        // A small buffer bounds the frame too.
        let mut reader: &[u8] = &framed(100, 100);
        let result = read_frame(&mut reader, &mut [0u8; 64], &|| false);
        assert!(result.is_err_and(|e| e.contains("bad frame length 100")));
    }

    #[test]
    fn a_stream_socket_carries_frames_both_ways_stops_and_drops_a_bad_peer() {
        let dir = std::env::temp_dir().join(format!("domos-stream-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let stream = Stream::connect(path.to_str().unwrap()).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        stream.write_frame(&[7u8; 20]).unwrap();
        let mut got = [0u8; 24];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(got[..4], 20u32.to_be_bytes());
        assert!(got[4..].iter().all(|&b| b == 7));
        peer.write_all(&framed(30, 30)).unwrap();
        let mut buffer = vec![0u8; MAX_STREAM_FRAME];
        let stopped = AtomicBool::new(false);
        assert_eq!(stream.read_frame(&mut buffer, &stopped), Ok(Some(30)));
        // Nothing to read: the read times out and sees the stop.
        stopped.store(true, Ordering::Release);
        assert_eq!(stream.read_frame(&mut buffer, &stopped), Ok(None));
        stopped.store(false, Ordering::Release);
        peer.write_all(&framed(5, 5)).unwrap();
        let error = stream.read_frame(&mut buffer, &stopped).unwrap_err();
        assert!(error.contains("bad frame length 5") && error.contains("connection dropped"), "{error}");
        let mut rest = Vec::new();
        assert_eq!(peer.read_to_end(&mut rest).ok(), Some(0), "the peer sees the end");
        assert!(stream.write_frame(&[0u8; 20]).is_err(), "nothing is sent after");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
