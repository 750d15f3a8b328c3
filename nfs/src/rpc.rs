//! ONC RPC version 2 (RFC 5531): call and reply messages, the AUTH_NONE and AUTH_SYS
//! credentials, and TCP record marking.
//!
//! A message is its header followed by the procedure's arguments or results, encoded by the
//! caller. A server decodes [`Message`] (borrowing the credential bytes from the datagram, no
//! copy), dispatches on [`CallHeader::program`], `version` and `procedure`, decodes the
//! arguments from the same [`Decoder`] and answers with [`encode_reply`] followed by the
//! results. A client encodes with [`encode_call`] and reads [`ReplyHeader`].

use alloc::vec::Vec;

use crate::xdr::{Decoder, Encoder, Xdr, XdrError};

/// The RPC protocol version this module speaks.
pub const RPC_VERSION: u32 = 2;
/// `msg_type` CALL.
pub const CALL: u32 = 0;
/// `msg_type` REPLY.
pub const REPLY: u32 = 1;
/// The largest credential or verifier body (RFC 5531 §8.2).
pub const MAX_AUTH_BYTES: usize = 400;
/// The longest AUTH_SYS machine name.
pub const MAX_MACHINE_NAME: usize = 255;
/// The most supplementary groups in an AUTH_SYS credential.
pub const MAX_GROUPS: usize = 16;

/// The authentication flavours (`auth_flavor`) this crate names.
pub mod flavor {
    /// No authentication.
    pub const AUTH_NONE: u32 = 0;
    /// Unix-style user and groups (`AUTH_UNIX` of old).
    pub const AUTH_SYS: u32 = 1;
    /// A short-hand credential a server handed out.
    pub const AUTH_SHORT: u32 = 2;
    /// Diffie-Hellman.
    pub const AUTH_DH: u32 = 3;
    /// RPCSEC_GSS.
    pub const RPCSEC_GSS: u32 = 6;
}

/// A credential or verifier (`opaque_auth`), its body borrowed from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpaqueAuth<'a> {
    /// The flavour (see [`flavor`]).
    pub flavor: u32,
    /// The flavour's body, at most 400 bytes.
    pub body: &'a [u8],
}

impl<'a> OpaqueAuth<'a> {
    /// AUTH_NONE with an empty body.
    pub const NONE: OpaqueAuth<'static> = OpaqueAuth { flavor: flavor::AUTH_NONE, body: &[] };

    /// Appends it.
    pub fn encode(&self, e: &mut Encoder) {
        e.u32(self.flavor);
        e.opaque(self.body);
    }

    /// Reads one; a body over 400 bytes is [`XdrError::TooLong`].
    pub fn decode(d: &mut Decoder<'a>) -> Result<OpaqueAuth<'a>, XdrError> {
        Ok(OpaqueAuth { flavor: d.u32()?, body: d.opaque(MAX_AUTH_BYTES)? })
    }
}

/// The body of an AUTH_SYS credential (`authsys_parms`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthSys {
    /// An arbitrary number the client chose.
    pub stamp: u32,
    /// The client's host name, at most 255 bytes (bytes, as sent: not necessarily UTF-8).
    pub machine_name: Vec<u8>,
    /// The caller's user id.
    pub uid: u32,
    /// The caller's group id.
    pub gid: u32,
    /// Supplementary groups, at most 16.
    pub gids: Vec<u32>,
}

impl Xdr for AuthSys {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.stamp);
        e.opaque(&self.machine_name);
        e.u32(self.uid);
        e.u32(self.gid);
        e.u32_array(&self.gids);
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        let stamp = d.u32()?;
        let machine_name = d.opaque_vec(MAX_MACHINE_NAME)?;
        Ok(AuthSys { stamp, machine_name, uid: d.u32()?, gid: d.u32()?, gids: d.u32_array(MAX_GROUPS)? })
    }
}

/// Who called, as far as the credential tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// The user id (AUTH_NONE: `nobody`, 65534).
    pub uid: u32,
    /// The group id (AUTH_NONE: 65534).
    pub gid: u32,
}

impl Caller {
    /// The caller named by AUTH_NONE.
    pub const NOBODY: Caller = Caller { uid: 65534, gid: 65534 };
}

impl OpaqueAuth<'_> {
    /// The caller an AUTH_NONE or AUTH_SYS credential names; `None` for another flavour or a
    /// malformed AUTH_SYS body (which a server answers with AUTH_ERROR: AUTH_BADCRED or
    /// AUTH_REJECTEDCRED). Reads the body without allocating.
    pub fn caller(&self) -> Option<Caller> {
        match self.flavor {
            flavor::AUTH_NONE => Some(Caller::NOBODY),
            flavor::AUTH_SYS => {
                let mut d = Decoder::new(self.body);
                d.u32().ok()?;
                d.opaque(MAX_MACHINE_NAME).ok()?;
                let uid = d.u32().ok()?;
                let gid = d.u32().ok()?;
                let groups = d.u32().ok()? as usize;
                if groups > MAX_GROUPS || d.remaining() != groups * 4 {
                    return None;
                }
                Some(Caller { uid, gid })
            }
            _ => None,
        }
    }
}

/// The header of a call (`rpc_msg` with a `call_body`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHeader<'a> {
    /// The transaction id the reply repeats.
    pub xid: u32,
    /// The RPC version the caller speaks (this crate: 2).
    pub rpc_version: u32,
    /// The program called.
    pub program: u32,
    /// Its version.
    pub version: u32,
    /// The procedure.
    pub procedure: u32,
    /// The credential.
    pub credential: OpaqueAuth<'a>,
    /// The verifier.
    pub verifier: OpaqueAuth<'a>,
}

/// Encodes a call header; the procedure's arguments follow.
pub fn encode_call(e: &mut Encoder, xid: u32, program: u32, version: u32, procedure: u32, credential: &OpaqueAuth<'_>) {
    e.u32(xid);
    e.u32(CALL);
    e.u32(RPC_VERSION);
    e.u32(program);
    e.u32(version);
    e.u32(procedure);
    credential.encode(e);
    OpaqueAuth::NONE.encode(e);
}

/// What a reply says about its call (`reply_body`: accepted or rejected, and why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyStatus {
    /// Accepted, SUCCESS: the procedure's results follow.
    Success,
    /// Accepted, PROG_UNAVAIL: the program is not served here.
    ProgramUnavailable,
    /// Accepted, PROG_MISMATCH: the versions of the program served, lowest and highest.
    ProgramMismatch {
        /// The lowest version served.
        low: u32,
        /// The highest version served.
        high: u32,
    },
    /// Accepted, PROC_UNAVAIL: no such procedure.
    ProcedureUnavailable,
    /// Accepted, GARBAGE_ARGS: the arguments did not decode.
    GarbageArguments,
    /// Accepted, SYSTEM_ERR: the server failed (out of memory, say).
    SystemError,
    /// Denied, RPC_MISMATCH: the RPC versions the server speaks.
    RpcMismatch {
        /// The lowest RPC version.
        low: u32,
        /// The highest RPC version.
        high: u32,
    },
    /// Denied, AUTH_ERROR with its `auth_stat` (see [`auth_stat`]).
    AuthError(u32),
}

/// The `auth_stat` values of an AUTH_ERROR.
pub mod auth_stat {
    /// Bad credential (seal broken).
    pub const AUTH_BADCRED: u32 = 1;
    /// The client must begin a new session.
    pub const AUTH_REJECTEDCRED: u32 = 2;
    /// Bad verifier.
    pub const AUTH_BADVERF: u32 = 3;
    /// The verifier expired or was replayed.
    pub const AUTH_REJECTEDVERF: u32 = 4;
    /// Rejected for security reasons: a flavour the server does not take.
    pub const AUTH_TOOWEAK: u32 = 5;
}

/// Encodes a reply header; after [`ReplyStatus::Success`] the procedure's results follow.
/// The verifier of an accepted reply is AUTH_NONE.
pub fn encode_reply(e: &mut Encoder, xid: u32, status: &ReplyStatus) {
    e.u32(xid);
    e.u32(REPLY);
    match *status {
        ReplyStatus::RpcMismatch { low, high } => {
            e.u32(1); // MSG_DENIED
            e.u32(0); // RPC_MISMATCH
            e.u32(low);
            e.u32(high);
        }
        ReplyStatus::AuthError(stat) => {
            e.u32(1); // MSG_DENIED
            e.u32(1); // AUTH_ERROR
            e.u32(stat);
        }
        accepted => {
            e.u32(0); // MSG_ACCEPTED
            OpaqueAuth::NONE.encode(e);
            match accepted {
                ReplyStatus::Success => e.u32(0),
                ReplyStatus::ProgramUnavailable => e.u32(1),
                ReplyStatus::ProgramMismatch { low, high } => {
                    e.u32(2);
                    e.u32(low);
                    e.u32(high);
                }
                ReplyStatus::ProcedureUnavailable => e.u32(3),
                ReplyStatus::GarbageArguments => e.u32(4),
                _ => e.u32(5), // SYSTEM_ERR
            }
        }
    }
}

/// The header of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader<'a> {
    /// The transaction id of the call answered.
    pub xid: u32,
    /// The verifier of an accepted reply (AUTH_NONE for a denied one).
    pub verifier: OpaqueAuth<'a>,
    /// Accepted or denied, and why.
    pub status: ReplyStatus,
}

/// An RPC message's header: a call or a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// A call; the arguments follow.
    Call(CallHeader<'a>),
    /// A reply; after SUCCESS the results follow.
    Reply(ReplyHeader<'a>),
}

impl<'a> Message<'a> {
    /// Reads a message header. A call's RPC version is not checked here: a server answers a
    /// version other than 2 with [`ReplyStatus::RpcMismatch`].
    pub fn decode(d: &mut Decoder<'a>) -> Result<Message<'a>, XdrError> {
        let xid = d.u32()?;
        match d.u32()? {
            CALL => Ok(Message::Call(CallHeader {
                xid,
                rpc_version: d.u32()?,
                program: d.u32()?,
                version: d.u32()?,
                procedure: d.u32()?,
                credential: OpaqueAuth::decode(d)?,
                verifier: OpaqueAuth::decode(d)?,
            })),
            REPLY => {
                let (verifier, status) = match d.u32()? {
                    0 => {
                        let verifier = OpaqueAuth::decode(d)?;
                        let status = match d.u32()? {
                            0 => ReplyStatus::Success,
                            1 => ReplyStatus::ProgramUnavailable,
                            2 => ReplyStatus::ProgramMismatch { low: d.u32()?, high: d.u32()? },
                            3 => ReplyStatus::ProcedureUnavailable,
                            4 => ReplyStatus::GarbageArguments,
                            5 => ReplyStatus::SystemError,
                            _ => return Err(XdrError::BadValue),
                        };
                        (verifier, status)
                    }
                    1 => {
                        let status = match d.u32()? {
                            0 => ReplyStatus::RpcMismatch { low: d.u32()?, high: d.u32()? },
                            1 => ReplyStatus::AuthError(d.u32()?),
                            _ => return Err(XdrError::BadValue),
                        };
                        (OpaqueAuth::NONE, status)
                    }
                    _ => return Err(XdrError::BadValue),
                };
                Ok(Message::Reply(ReplyHeader { xid, verifier, status }))
            }
            _ => Err(XdrError::BadValue),
        }
    }
}

/// TCP record marking (RFC 5531 §11): each record is sent as fragments, each preceded by a
/// 4-byte header whose top bit marks the last fragment and whose other 31 bits give its length.
pub mod record {
    use alloc::vec::Vec;

    /// The top bit of a fragment header: this fragment ends the record.
    pub const LAST_FRAGMENT: u32 = 0x8000_0000;

    /// The header of a record sent as one fragment of `len` bytes.
    pub fn header(len: usize) -> [u8; 4] {
        (LAST_FRAGMENT | (len as u32 & !LAST_FRAGMENT)).to_be_bytes()
    }

    /// `message` framed as one record of one fragment.
    pub fn frame(message: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(message.len() + 4);
        out.extend_from_slice(&header(message.len()));
        out.extend_from_slice(message);
        out
    }

    /// Why a byte stream is not a sequence of records.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum RecordError {
        /// A record longer than the reader's maximum: the connection is to be closed.
        TooLong,
    }

    /// Reassembles records from the bytes of a stream as they arrive, bounded: a record
    /// announcing more than `max` bytes is refused before any of it is buffered.
    ///
    /// Bytes go into one buffer, reused (`push`, or `fill` to read straight into it), and a
    /// record sent as one fragment — the usual case — is handed out where it lies, as a slice:
    /// no copy besides the one into the buffer. Only a record of several fragments is assembled
    /// apart.
    #[derive(Debug)]
    pub struct RecordReader {
        /// `buffer[start..end]`: bytes received and not yet consumed; after `end`, room.
        buffer: Vec<u8>,
        start: usize,
        end: usize,
        /// The fragments of a record of several, assembled.
        assembled: Vec<u8>,
        /// A record `complete` found and `next_record` has not yet handed out.
        found: Option<Found>,
        /// `assembled` was handed out: it is emptied at the next look.
        handed_assembled: bool,
        max: usize,
    }

    /// Where a complete record lies.
    #[derive(Debug, Clone, Copy)]
    enum Found {
        /// `len` bytes after the fragment header at `start`.
        InBuffer(usize),
        /// In `assembled`.
        Assembled,
    }

    /// The room `fill` offers at the least: a 64 KiB READ reply and then some.
    const FILL_ROOM: usize = 128 << 10;

    impl RecordReader {
        /// A reader refusing records over `max` bytes.
        pub fn new(max: usize) -> RecordReader {
            RecordReader {
                buffer: Vec::new(),
                start: 0,
                end: 0,
                assembled: Vec::new(),
                found: None,
                handed_assembled: false,
                max,
            }
        }

        /// Adds bytes received from the stream.
        pub fn push(&mut self, bytes: &[u8]) {
            self.make_room(bytes.len());
            self.buffer[self.end..self.end + bytes.len()].copy_from_slice(bytes);
            self.end += bytes.len();
        }

        /// Lets `read` put bytes received from the stream straight into the buffer's room (at
        /// least 128 KiB) and returns what it returned: how many it put there.
        ///
        /// # Errors
        /// `read`'s.
        pub fn fill<E>(&mut self, read: impl FnOnce(&mut [u8]) -> Result<usize, E>) -> Result<usize, E> {
            self.make_room(FILL_ROOM);
            let n = read(&mut self.buffer[self.end..])?;
            self.end += n.min(self.buffer.len() - self.end);
            Ok(n)
        }

        /// Whether a complete record is there for [`RecordReader::next_record`]: assembles
        /// fragments as far as the bytes go.
        ///
        /// # Errors
        /// A record of more than the reader's maximum: the connection is to be closed.
        pub fn complete(&mut self) -> Result<bool, RecordError> {
            if self.found.is_some() {
                return Ok(true);
            }
            if core::mem::take(&mut self.handed_assembled) {
                self.assembled.clear();
            }
            loop {
                let available = &self.buffer[self.start..self.end];
                if available.len() < 4 {
                    return Ok(false);
                }
                let header = u32::from_be_bytes([available[0], available[1], available[2], available[3]]);
                let len = (header & !LAST_FRAGMENT) as usize;
                if self.assembled.len().saturating_add(len) > self.max {
                    return Err(RecordError::TooLong);
                }
                if available.len() - 4 < len {
                    return Ok(false);
                }
                let last = header & LAST_FRAGMENT != 0;
                if last && self.assembled.is_empty() {
                    self.found = Some(Found::InBuffer(len));
                    return Ok(true);
                }
                self.assembled.extend_from_slice(&available[4..4 + len]);
                self.start += 4 + len;
                if last {
                    self.found = Some(Found::Assembled);
                    return Ok(true);
                }
            }
        }

        /// The next complete record, if the bytes pushed so far hold one; it lives until the
        /// reader is next used.
        ///
        /// # Errors
        /// A record of more than the reader's maximum: the connection is to be closed.
        pub fn next_record(&mut self) -> Result<Option<&[u8]>, RecordError> {
            if !self.complete()? {
                return Ok(None);
            }
            match self.found.take() {
                Some(Found::InBuffer(len)) => {
                    let from = self.start + 4;
                    self.start = from + len;
                    Ok(Some(&self.buffer[from..from + len]))
                }
                Some(Found::Assembled) => {
                    self.handed_assembled = true;
                    Ok(Some(&self.assembled))
                }
                None => Ok(None),
            }
        }

        /// Makes room for `wanted` bytes after `end`: first by moving the unconsumed bytes to
        /// the front (a part of one record, mostly), then by growing the buffer.
        fn make_room(&mut self, wanted: usize) {
            if self.buffer.len() - self.end >= wanted {
                return;
            }
            if self.start > 0 {
                self.buffer.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buffer.len() - self.end < wanted {
                self.buffer.resize(self.end + wanted, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::record::{RecordError, RecordReader};
    use super::*;
    use alloc::vec;

    /// A NULL call to program 100003 version 3 with AUTH_NONE, field by field (RFC 5531 §9).
    #[test]
    fn call_header_layout() {
        let mut e = Encoder::new();
        encode_call(&mut e, 0x1234_5678, 100_003, 3, 0, &OpaqueAuth::NONE);
        let expected: [u32; 10] = [0x1234_5678, 0, 2, 100_003, 3, 0, 0, 0, 0, 0];
        let expected: Vec<u8> = expected.iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(e.as_bytes(), expected.as_slice());
        let mut d = Decoder::new(e.as_bytes());
        let Message::Call(call) = Message::decode(&mut d).unwrap() else { panic!("a call") };
        assert_eq!(
            (call.xid, call.rpc_version, call.program, call.version, call.procedure),
            (0x1234_5678, 2, 100_003, 3, 0)
        );
        assert_eq!(call.credential.caller(), Some(Caller::NOBODY));
    }

    #[test]
    fn auth_sys_round_trip_and_layout() {
        let sys = AuthSys { stamp: 1, machine_name: b"host".to_vec(), uid: 1000, gid: 100, gids: vec![4, 24] };
        let body = sys.to_xdr();
        let words: [u32; 3] = [1, 4, u32::from_be_bytes(*b"host")];
        let mut expected: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        for w in [1000u32, 100, 2, 4, 24] {
            expected.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(body, expected);
        assert_eq!(AuthSys::from_xdr(&body), Ok(sys));
        let cred = OpaqueAuth { flavor: flavor::AUTH_SYS, body: &body };
        assert_eq!(cred.caller(), Some(Caller { uid: 1000, gid: 100 }));
        // Seventeen groups, or a body cut short, name no caller.
        let mut long = AuthSys { gids: vec![0; 17], ..AuthSys::default() }.to_xdr();
        assert_eq!(OpaqueAuth { flavor: flavor::AUTH_SYS, body: &long }.caller(), None);
        long.truncate(8);
        assert_eq!(OpaqueAuth { flavor: flavor::AUTH_SYS, body: &long }.caller(), None);
        assert_eq!(OpaqueAuth { flavor: flavor::RPCSEC_GSS, body: &[] }.caller(), None);
        // A machine name that is not UTF-8 comes back as sent (found by the nfs_decode fuzz
        // target: a lossy conversion made 255 bytes into more than 255).
        let odd = AuthSys { machine_name: vec![0xff; 255], ..AuthSys::default() };
        assert_eq!(AuthSys::from_xdr(&odd.to_xdr()), Ok(odd));
    }

    #[test]
    fn replies_round_trip_with_their_layouts() {
        let cases = [
            (ReplyStatus::Success, vec![1, 0, 0, 0, 0]),
            (ReplyStatus::ProgramUnavailable, vec![1, 0, 0, 0, 1]),
            (ReplyStatus::ProgramMismatch { low: 3, high: 3 }, vec![1, 0, 0, 0, 2, 3, 3]),
            (ReplyStatus::ProcedureUnavailable, vec![1, 0, 0, 0, 3]),
            (ReplyStatus::GarbageArguments, vec![1, 0, 0, 0, 4]),
            (ReplyStatus::SystemError, vec![1, 0, 0, 0, 5]),
            (ReplyStatus::RpcMismatch { low: 2, high: 2 }, vec![1, 1, 0, 2, 2]),
            (ReplyStatus::AuthError(auth_stat::AUTH_TOOWEAK), vec![1, 1, 1, 5]),
        ];
        for (status, words) in cases {
            let mut e = Encoder::new();
            encode_reply(&mut e, 9, &status);
            let mut expected: Vec<u8> = 9u32.to_be_bytes().to_vec();
            expected.extend(words.iter().flat_map(|w: &u32| w.to_be_bytes()));
            assert_eq!(e.as_bytes(), expected.as_slice(), "{status:?}");
            let mut d = Decoder::new(e.as_bytes());
            let Ok(Message::Reply(reply)) = Message::decode(&mut d) else { panic!("a reply") };
            assert_eq!((reply.xid, reply.status), (9, status));
            assert_eq!(d.remaining(), 0);
        }
    }

    #[test]
    fn malformed_headers_fail() {
        // Truncated anywhere.
        let mut e = Encoder::new();
        encode_call(&mut e, 1, 100_000, 2, 3, &OpaqueAuth::NONE);
        for len in 0..e.len() {
            assert!(Message::decode(&mut Decoder::new(&e.as_bytes()[..len])).is_err(), "{len}");
        }
        // A message type that is neither, a credential of 401 bytes.
        assert_eq!(Message::decode(&mut Decoder::new(&[0, 0, 0, 1, 0, 0, 0, 2])), Err(XdrError::BadValue));
        let mut e = Encoder::new();
        e.u32(1);
        e.u32(CALL);
        for w in [2, 100_003, 3, 1, 1] {
            e.u32(w);
        }
        e.opaque(&[0; 401]);
        assert_eq!(Message::decode(&mut Decoder::new(e.as_bytes())), Err(XdrError::TooLong));
    }

    #[test]
    fn records_reassemble_from_fragments_and_pieces() {
        let mut stream = Vec::new();
        stream.extend_from_slice(&3u32.to_be_bytes()); // not last
        stream.extend_from_slice(b"abc");
        stream.extend_from_slice(&record::header(2));
        stream.extend_from_slice(b"de");
        stream.extend_from_slice(&record::frame(b"xyz"));
        let mut reader = RecordReader::new(100);
        let mut records = Vec::new();
        for byte in &stream {
            reader.push(core::slice::from_ref(byte));
            while let Some(r) = reader.next_record().unwrap() {
                records.push(r.to_vec());
            }
        }
        assert_eq!(records, vec![b"abcde".to_vec(), b"xyz".to_vec()]);
        assert_eq!(record::header(5), [0x80, 0, 0, 5]);
        let mut reader = RecordReader::new(100);
        reader.push(&record::header(0x7fff_ffff));
        assert_eq!(reader.next_record(), Err(RecordError::TooLong));
    }

    #[test]
    fn records_read_straight_into_the_buffer_come_out_whole() {
        // Records of 0 to 40 KiB, some of two fragments, read 7,000 bytes at a time: the buffer
        // is moved to its front and grown as it goes.
        let records: Vec<Vec<u8>> =
            (0..200u32).map(|i| (0..(i * 211) % (40 << 10)).map(|j| (i ^ j) as u8).collect()).collect();
        let mut stream = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if i % 3 == 0 && r.len() > 1 {
                let half = r.len() / 2;
                stream.extend_from_slice(&(half as u32).to_be_bytes());
                stream.extend_from_slice(&r[..half]);
                stream.extend_from_slice(&record::header(r.len() - half));
                stream.extend_from_slice(&r[half..]);
            } else {
                stream.extend_from_slice(&record::frame(r));
            }
        }
        let mut reader = RecordReader::new(40 << 10);
        let mut got = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            let n = reader
                .fill(|room| -> Result<usize, ()> {
                    let n = room.len().min(7_000).min(stream.len() - at);
                    room[..n].copy_from_slice(&stream[at..at + n]);
                    Ok(n)
                })
                .unwrap();
            at += n;
            assert!(reader.complete().is_ok());
            while let Some(r) = reader.next_record().unwrap() {
                got.push(r.to_vec());
            }
        }
        assert_eq!(got, records);
    }
}
