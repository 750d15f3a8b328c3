//! The load generator's transport and its engine: ONC RPC messages over UDP (one per datagram)
//! or TCP (record marking, RFC 5531 §11, through `domos-nfs`'s `RecordReader`), kept
//! `in_flight` at a time with distinct xids and matched replies. The messages themselves are
//! made and read by `domos-nfs` (see `super::protocol`); here they are bytes.
//!
//! On UDP a request whose reply has not come within [`RETRANSMIT`] is sent again under a new xid
//! (and counted), so a lost datagram costs a little time, never the run; a late reply to the old
//! xid is ignored. On TCP nothing is lost, so silence for [`SILENCE`] ends the run with an error.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use domos_nfs::rpc::record::{self, RecordReader};

use crate::host;

/// How long a UDP request waits for its reply before it is sent again.
pub const RETRANSMIT: Duration = Duration::from_millis(100);

/// How long a server may stay silent while requests are outstanding before the run fails.
pub const SILENCE: Duration = Duration::from_secs(10);

/// How often the engine wakes to look at its clocks while nothing arrives.
const POLL: Duration = Duration::from_millis(5);

/// The largest reply accepted (a 1 MiB READ and its headers).
const MAX_RECORD: usize = 2 << 20;

/// Width of one bucket of the rate over time.
pub const TICK: Duration = Duration::from_millis(100);

/// UDP or TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// One message per datagram.
    Udp,
    /// A stream of records.
    Tcp,
}

impl Transport {
    /// `udp` or `tcp`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// A connection to one server port.
pub enum Channel {
    /// A connected UDP socket and the buffer datagrams are received into.
    Udp { socket: UdpSocket, datagram: Vec<u8> },
    /// A TCP connection, the records read of it (received straight into its buffer, handed
    /// out where they lie) and a send buffer.
    Tcp { stream: TcpStream, records: RecordReader, out: Vec<u8> },
}

impl Channel {
    /// Connects to `server` over `transport`. Call it on a thread inside the server's network
    /// namespace (`Namespace::within`); the socket stays there.
    ///
    /// # Errors
    /// When the socket cannot be made or the connection is refused.
    pub fn open(transport: Transport, server: SocketAddr) -> Result<Channel, String> {
        let channel = match transport {
            Transport::Udp => {
                let socket = UdpSocket::bind("0.0.0.0:0").map_err(|e| format!("udp socket: {e}"))?;
                socket.connect(server).map_err(|e| format!("udp connect {server}: {e}"))?;
                socket.set_read_timeout(Some(POLL)).map_err(|e| e.to_string())?;
                Channel::Udp { socket, datagram: vec![0; 65536] }
            }
            Transport::Tcp => {
                let stream = TcpStream::connect_timeout(&server, Duration::from_secs(5))
                    .map_err(|e| format!("tcp connect {server}: {e}"))?;
                stream.set_nodelay(true).map_err(|e| e.to_string())?;
                stream.set_read_timeout(Some(POLL)).map_err(|e| e.to_string())?;
                Channel::Tcp { stream, records: RecordReader::new(MAX_RECORD), out: Vec::with_capacity(128 << 10) }
            }
        };
        Ok(channel)
    }

    /// The transport.
    pub fn transport(&self) -> Transport {
        match self {
            Channel::Udp { .. } => Transport::Udp,
            Channel::Tcp { .. } => Transport::Tcp,
        }
    }

    /// Sends one message (on TCP as one record of one fragment).
    ///
    /// # Errors
    /// When the socket fails.
    pub fn send(&mut self, message: &[u8]) -> Result<(), String> {
        match self {
            Channel::Udp { socket, .. } => match socket.send(message) {
                Ok(_) => Ok(()),
                // A full socket buffer or an ICMP error from an earlier datagram: the request is
                // lost like a dropped datagram, and retransmitted like one.
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::ConnectionRefused) => Ok(()),
                Err(e) => Err(format!("udp send: {e}")),
            },
            Channel::Tcp { stream, out, .. } => {
                out.clear();
                out.extend_from_slice(&record::header(message.len()));
                out.extend_from_slice(message);
                stream.write_all(out).map_err(|e| format!("tcp send: {e}"))
            }
        }
    }

    /// The next message, or `None` when none came within the poll interval; it lives until the
    /// channel is next used.
    ///
    /// # Errors
    /// When the socket fails, the server closes the connection, or a record is malformed.
    pub fn receive(&mut self) -> Result<Option<&[u8]>, String> {
        let too_long = |_| format!("a record of more than {MAX_RECORD} bytes from the server");
        match self {
            Channel::Udp { socket, datagram } => match socket.recv(datagram) {
                Ok(n) => Ok(Some(&datagram[..n])),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(None),
                // An ICMP port unreachable for an earlier datagram: the server is not there
                // (yet); the caller's retransmission and silence limits decide.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => Ok(None),
                Err(e) => Err(format!("udp receive: {e}")),
            },
            Channel::Tcp { stream, records, .. } => {
                while !records.complete().map_err(too_long)? {
                    match records.fill(|room| stream.read(room)) {
                        Ok(0) => return Err("the server closed the TCP connection".into()),
                        Ok(_) => {}
                        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Ok(None),
                        Err(e) => return Err(format!("tcp receive: {e}")),
                    }
                }
                records.next_record().map_err(too_long)
            }
        }
    }

    /// One call: sends what `make(xid)` encodes and returns the reply with that xid, retrying
    /// on UDP; gives up after [`SILENCE`].
    ///
    /// # Errors
    /// When the server does not answer, or the socket fails.
    pub fn call(&mut self, xids: &mut Xids, make: &dyn Fn(u32) -> Vec<u8>) -> Result<Vec<u8>, String> {
        let start = Instant::now();
        'send: loop {
            let xid = xids.next();
            self.send(&make(xid))?;
            let sent = Instant::now();
            loop {
                host::check_interrupted()?;
                if let Some(reply) = self.receive()? {
                    if xid_of(reply) == Some(xid) {
                        return Ok(reply.to_vec());
                    }
                    continue;
                }
                if start.elapsed() > SILENCE {
                    return Err(format!("no reply within {SILENCE:?}"));
                }
                if self.transport() == Transport::Udp && sent.elapsed() > RETRANSMIT * 5 {
                    continue 'send;
                }
            }
        }
    }
}

/// The transaction id of an RPC message: its first word (RFC 5531 §9).
pub fn xid_of(message: &[u8]) -> Option<u32> {
    message.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Distinct transaction ids, starting from a value that differs between runs.
pub struct Xids(u32);

impl Xids {
    /// Ids from a seed taken from the clock.
    pub fn new() -> Xids {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.subsec_nanos());
        Xids(seed)
    }

    /// The next id.
    pub fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(1);
        self.0
    }
}

impl Default for Xids {
    fn default() -> Self {
        Xids::new()
    }
}

/// What a run of the engine achieved.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Replies counted.
    pub completed: u64,
    /// Bytes the replies' checks reported (READ data, WRITE counts).
    pub bytes: u64,
    /// UDP requests sent again after [`RETRANSMIT`].
    pub retransmitted: u64,
    /// From the first request to the end of the window (rate) or the last reply (bulk).
    pub elapsed: Duration,
    /// Replies per [`TICK`] since the first request.
    pub per_tick: Vec<u32>,
}

impl Outcome {
    /// Replies per second.
    pub fn rate(&self) -> f64 {
        self.completed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// MiB per second of the bytes counted.
    pub fn mib_per_second(&self) -> f64 {
        self.bytes as f64 / f64::from(1u32 << 20) / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// What to run: how many requests in flight, and either a time window (requests are made until
/// it closes, at most `limit`; replies after it are not counted) or a fixed number of requests
/// all of which must be answered.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Requests outstanding at once.
    pub in_flight: usize,
    /// The window, for a rate; `None` for a fixed amount of work.
    pub window: Option<Duration>,
    /// Requests made at most.
    pub limit: u64,
}

/// Checks reply number `seq` and returns the bytes it carried.
pub type Check<'a> = dyn FnMut(u64, &[u8]) -> Result<u64, String> + 'a;

/// Keeps `load.in_flight` requests outstanding on `channel`: request number `seq` is
/// `make(xid, seq)`; each reply is checked by `check(seq, reply)`, which returns the bytes it
/// carried (or an error, which ends the run).
///
/// # Errors
/// A failed check, a silent server, a socket error, or an interruption.
pub fn drive(
    channel: &mut Channel,
    xids: &mut Xids,
    load: Load,
    make: &mut dyn FnMut(u32, u64) -> Vec<u8>,
    check: &mut Check<'_>,
) -> Result<Outcome, String> {
    let mut outcome = Outcome::default();
    // (xid, seq, sent at) of each outstanding request.
    let mut outstanding: Vec<(u32, u64, Instant)> = Vec::with_capacity(load.in_flight);
    let mut made = 0u64;
    let start = Instant::now();
    let end = load.window.map(|w| start + w);
    let mut last_heard = start;
    let udp = channel.transport() == Transport::Udp;
    loop {
        let now = Instant::now();
        let open = end.is_none_or(|end| now < end);
        while open && outstanding.len() < load.in_flight && made < load.limit {
            let xid = xids.next();
            channel.send(&make(xid, made))?;
            outstanding.push((xid, made, Instant::now()));
            made += 1;
        }
        if !open || outstanding.is_empty() {
            break;
        }
        if let Some(reply) = channel.receive()? {
            let Some(xid) = xid_of(reply) else { continue };
            // A reply to a request given up on, or sent again, is ignored.
            let Some(at) = outstanding.iter().position(|(x, ..)| *x == xid) else { continue };
            let (_, seq, _) = outstanding.swap_remove(at);
            let now = Instant::now();
            if end.is_some_and(|end| now >= end) {
                break;
            }
            outcome.bytes += check(seq, reply)?;
            outcome.completed += 1;
            last_heard = now;
            let tick = (now - start).as_nanos() / TICK.as_nanos();
            let tick = usize::try_from(tick).unwrap_or(usize::MAX);
            if outcome.per_tick.len() <= tick {
                outcome.per_tick.resize(tick + 1, 0);
            }
            outcome.per_tick[tick] += 1;
            continue;
        }
        host::check_interrupted()?;
        let now = Instant::now();
        if now - last_heard > SILENCE {
            return Err(format!(
                "the server stopped answering: no reply for {SILENCE:?} with {} requests outstanding",
                outstanding.len()
            ));
        }
        if udp {
            for entry in outstanding.iter_mut().filter(|(_, _, sent)| now - *sent > RETRANSMIT) {
                let xid = xids.next();
                channel.send(&make(xid, entry.1))?;
                *entry = (xid, entry.1, Instant::now());
                outcome.retransmitted += 1;
            }
        }
    }
    outcome.elapsed = match end {
        Some(end) => end.min(Instant::now()) - start,
        None => last_heard - start,
    };
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_keeps_requests_in_flight_and_retransmits_lost_datagrams() {
        // A UDP "server" on loopback that answers every request but drops the first one.
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let address = server.local_addr().unwrap();
        let echo = std::thread::spawn(move || {
            let mut buffer = [0u8; 64];
            let mut seen = 0;
            server.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            while let Ok((n, from)) = server.recv_from(&mut buffer) {
                seen += 1;
                if seen > 1 {
                    server.send_to(&buffer[..n], from).unwrap();
                }
            }
            seen
        });
        let mut channel = Channel::open(Transport::Udp, address).unwrap();
        let mut xids = Xids::new();
        let load = Load { in_flight: 4, window: None, limit: 50 };
        let mut seen = Vec::new();
        let outcome = drive(
            &mut channel,
            &mut xids,
            load,
            &mut |xid, seq| [xid.to_be_bytes(), (seq as u32).to_be_bytes()].concat(),
            &mut |seq, reply| {
                assert_eq!(reply[4..8], (seq as u32).to_be_bytes());
                seen.push(seq);
                Ok(8)
            },
        )
        .unwrap();
        assert_eq!(outcome.completed, 50);
        assert_eq!(outcome.bytes, 400);
        assert_eq!(outcome.retransmitted, 1, "the dropped datagram was sent again");
        seen.sort_unstable();
        assert!(seen.into_iter().eq(0..50));
        drop(channel);
        assert_eq!(echo.join().unwrap(), 51);
    }
}
