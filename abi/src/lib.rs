//! The contract between the Domos kernel (DomainZero) and guest components.
//!
//! Both sides depend on this crate, so the host-call module name, the error codes and the
//! portal message layout are written down exactly once.
#![no_std]
#![forbid(unsafe_code)]

mod arguments;
mod c_header;
mod entry_points;
mod host_calls;
pub mod nic;
pub use arguments::{ARGUMENTS_DOC, Arguments, decode_arguments, encode_arguments};
pub use c_header::{CLANG_SINGLE, CLANG_THREADED, render_c_header};
pub use entry_points::{ENTRY_POINTS, EntryPoint, component_export};
pub use host_calls::{Grant, HOST_CALLS, HostCall, IntType, ValueType, render_index};

/// The wasm import module under which every kernel host call is offered.
pub const HOST_MODULE: &str = "domos";

/// The custom section that carries a component's manifest (TOML text). A module that links
/// several components carries one section per component instead, named this, a colon and the
/// component's name (`domos:manifest:fs-ext2`), as the Rust SDK writes them.
pub const MANIFEST_SECTION: &str = "domos:manifest";

/// Largest memory object (and emulated device memory): 1 GiB.
pub const MAX_MEMORY_OBJECT: u64 = 1 << 30;

/// Most handles one portal message may carry.
pub const MAX_MESSAGE_HANDLES: usize = 16;

/// Bytes the kernel reserves right before each thread's message buffer, at the top of its stack
/// region, for the thread's own runtime: the Rust SDK keeps there whether the buffer's bytes
/// are lent out, so that no two references to them exist at once. The kernel zeroes them when
/// it gives the region to a new thread and never writes them otherwise. Sixteen, so that the
/// stack's top stays 16-byte aligned.
pub const BUFFER_RUNTIME_BYTES: u32 = 16;

/// The bit `fuse_ready` adds to its count once a FUSE device reads no more requests (it was
/// unmounted, or the system is stopping): the driver answers what the ring holds, syncs and ends.
pub const FUSE_STOPPED: i64 = 1 << 32;

/// The text of [`MessageLayout`]'s documentation, which the C header repeats.
macro_rules! message_layout_doc {
    () => {
        "A message in a thread's message buffer is \
         `[payload_len: u32][payload][handle_count: u32][handles: u32 × handle_count]`, all \
         little-endian; handles come last so that an encoder can append them without moving the \
         payload. The kernel accepts a message only if these lengths describe exactly the length \
         passed to `portal_call` (or returned by `domos_dispatch`), with at most \
         `MAX_MESSAGE_HANDLES` handles; it copies the payload unchanged and moves each handle into \
         the receiver's handle table, rewriting it to the receiver's number."
    };
}

/// How a portal message is laid out, for people and for other languages' headers: the
/// documentation of [`MessageLayout`].
pub const MESSAGE_LAYOUT_DOC: &str = message_layout_doc!();

/// Where the parts of a portal message lie.
///
#[doc = message_layout_doc!()]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageLayout {
    /// Length of the payload, which starts at byte 4.
    pub payload_len: usize,
    /// Number of handles, which start at byte `8 + payload_len`.
    pub handle_count: usize,
}

impl MessageLayout {
    /// Offset of the payload.
    pub const PAYLOAD_OFFSET: usize = 4;

    /// The total length of a message with this layout.
    pub fn total_len(&self) -> usize {
        8usize.saturating_add(self.payload_len).saturating_add(self.handle_count.saturating_mul(4))
    }

    /// Offset of the first handle.
    pub fn handles_offset(&self) -> usize {
        8 + self.payload_len
    }

    /// Reads and checks the layout of the `len`-byte message at the start of `bytes`.
    ///
    /// # Errors
    /// `HostError::MalformedMessage` when the lengths disagree or exceed `MAX_MESSAGE_HANDLES`.
    pub fn parse(bytes: &[u8], len: usize) -> Result<MessageLayout, HostError> {
        let malformed = HostError::MalformedMessage;
        let message = bytes.get(..len).ok_or(malformed)?;
        let payload_len = read_u32(message, 0).ok_or(malformed)?;
        let count_at = (payload_len as usize).checked_add(4).ok_or(malformed)?;
        let handle_count = read_u32(message, count_at).ok_or(malformed)?;
        MessageLayout::check(payload_len, handle_count, len)
    }

    /// Checks a payload length and handle count, read from a message of `len` bytes.
    ///
    /// # Errors
    /// `HostError::MalformedMessage` when they do not describe exactly `len` bytes.
    pub fn check(payload_len: u32, handle_count: u32, len: usize) -> Result<MessageLayout, HostError> {
        let layout = MessageLayout { payload_len: payload_len as usize, handle_count: handle_count as usize };
        if layout.handle_count > MAX_MESSAGE_HANDLES || layout.total_len() != len {
            return Err(HostError::MalformedMessage);
        }
        Ok(layout)
    }
}

/// What a disk request does: `disk_submit`'s `operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum DiskOperation {
    /// Sectors into the memory object.
    Read = 0,
    /// The memory object's bytes onto the sectors.
    Write = 1,
    /// Everything written reaches the disk's image file.
    Flush = 2,
}

impl DiskOperation {
    /// The operation with code `code`.
    pub fn from_code(code: u32) -> Option<DiskOperation> {
        [DiskOperation::Read, DiskOperation::Write, DiskOperation::Flush].into_iter().find(|op| *op as u32 == code)
    }
}

/// A finished disk request, as `disk_complete` returns it: `id << 1 | failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskCompletion {
    /// The id `disk_submit` returned.
    pub id: u64,
    /// Whether the request failed.
    pub failed: bool,
}

impl DiskCompletion {
    /// The host call's result for this completion.
    pub fn encode(self) -> i64 {
        ((self.id << 1) | u64::from(self.failed)) as i64
    }

    /// The completion a non-negative result of `disk_complete` stands for.
    pub fn decode(result: i64) -> Option<DiskCompletion> {
        let bits = u64::try_from(result).ok()?;
        Some(DiskCompletion { id: bits >> 1, failed: bits & 1 == 1 })
    }
}

/// One piece of a `memory_gather`: `len` bytes at `offset` of the memory object `source`, in
/// the guest's list as 20 little-endian bytes (`source`, `offset`, `len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatherPiece {
    /// The handle of the memory object to copy from.
    pub source: u32,
    /// Where in it the piece starts.
    pub offset: u64,
    /// Its length.
    pub len: u64,
}

impl GatherPiece {
    /// Bytes of a piece in the list.
    pub const BYTES: usize = 20;
    /// Most pieces of one `memory_gather`.
    pub const MAX: usize = 32;

    /// The piece's bytes in the list.
    pub fn encode(self) -> [u8; GatherPiece::BYTES] {
        let mut bytes = [0u8; GatherPiece::BYTES];
        bytes[..4].copy_from_slice(&self.source.to_le_bytes());
        bytes[4..12].copy_from_slice(&self.offset.to_le_bytes());
        bytes[12..].copy_from_slice(&self.len.to_le_bytes());
        bytes
    }

    /// The piece whose bytes these are.
    pub fn decode(bytes: &[u8; GatherPiece::BYTES]) -> GatherPiece {
        let u64_at = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(word)
        };
        GatherPiece {
            source: u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            offset: u64_at(4),
            len: u64_at(12),
        }
    }
}

/// The one portal call the kernel makes itself: a child domain's memory fault, sent to the
/// `MemoryFaultHandler` (interfaces/src/memory_fault_handler.rs) its parent registered. The
/// kernel cannot link the SDK, so the interface's identity and the SDK's `Wire` encoding of
/// `out_of_memory(child: u32, short_by: u64) -> Result<u64, CallError>` are written here; the
/// sandbox system tests check them end to end against the real interface.
pub mod memory_fault {
    use crate::fnv1a;

    /// The interface identifier of `MemoryFaultHandler@1`.
    pub const INTERFACE: u32 = fnv1a(b"MemoryFaultHandler@1");

    /// The method identifier of `out_of_memory`.
    pub const OUT_OF_MEMORY: u32 = fnv1a(b"out_of_memory");

    /// The payload of `out_of_memory(child, short_by)`.
    pub fn request(child: u32, short_by: u64) -> [u8; 12] {
        let mut payload = [0u8; 12];
        payload[..4].copy_from_slice(&child.to_le_bytes());
        payload[4..].copy_from_slice(&short_by.to_le_bytes());
        payload
    }

    /// The bytes granted by a reply payload: `Ok(granted)` is a 0 byte and a `u64`; anything
    /// else (an error, a malformed reply) grants nothing.
    pub fn granted(reply: &[u8]) -> u64 {
        match reply {
            [0, rest @ ..] => rest.try_into().map_or(0, u64::from_le_bytes),
            _ => 0,
        }
    }
}

/// The little-endian `u32` at `at`, if `bytes` holds it.
pub fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    let b = bytes.get(at..end)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Errors a host call reports to a guest, as negative return values.
///
/// Every failure a component or its peers can cause ends in one of these codes; none of them
/// stops the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum HostError {
    /// The handle was never issued to this domain, was dropped, or names another kind of object.
    InvalidHandle = -1,
    /// The service is gone: its last portal was dropped or its domain terminated.
    ServiceDead = -2,
    /// The message exceeds the per-call quota of the receiving or sending domain.
    MessageTooLarge = -3,
    /// The portal does not implement the interface the caller asked for.
    WrongInterface = -4,
    /// No service is registered under that name.
    NotFound = -5,
    /// The domain's memory quota does not allow the request.
    QuotaExceeded = -6,
    /// The message header or a string argument is malformed.
    MalformedMessage = -7,
    /// The service trapped while handling the call; its domain was terminated.
    ServiceFault = -8,
    /// The name is already registered.
    NameTaken = -9,
    /// The component was not granted this operation.
    NotPermitted = -10,
    /// An argument is out of range.
    InvalidArgument = -11,
    /// The service does not know the method.
    UnknownMethod = -12,
    /// The service could not decode the request or encode the reply.
    BadRequest = -13,
    /// Every service thread of the target is busy: a thread waits with `portal_wait`; a service
    /// call, which never blocks, fails with this error.
    ServiceBusy = -14,
    /// The memory object was revoked: its holder took back the range.
    Revoked = -15,
    /// The memory object is a read-only view.
    ReadOnly = -16,
    /// The service may wait for events: call it again with `portal_call_waiting`.
    MustWait = -17,
}

impl HostError {
    /// Every error code, for decoding.
    pub const ALL: [HostError; 17] = [
        HostError::InvalidHandle,
        HostError::ServiceDead,
        HostError::MessageTooLarge,
        HostError::WrongInterface,
        HostError::NotFound,
        HostError::QuotaExceeded,
        HostError::MalformedMessage,
        HostError::ServiceFault,
        HostError::NameTaken,
        HostError::NotPermitted,
        HostError::InvalidArgument,
        HostError::UnknownMethod,
        HostError::BadRequest,
        HostError::ServiceBusy,
        HostError::Revoked,
        HostError::ReadOnly,
        HostError::MustWait,
    ];

    /// Decodes a negative host-call result; `None` for a non-negative value or an unknown code.
    pub fn from_code(code: i64) -> Option<HostError> {
        HostError::ALL.into_iter().find(|e| *e as i64 == code)
    }

    /// A short description for people.
    pub fn describe(self) -> &'static str {
        match self {
            HostError::InvalidHandle => "invalid handle (forged, dropped or of another kind)",
            HostError::ServiceDead => "service is gone (deactivated or its domain terminated)",
            HostError::MessageTooLarge => "message exceeds the per-call quota",
            HostError::WrongInterface => "portal does not implement the requested interface",
            HostError::NotFound => "no service registered under that name",
            HostError::QuotaExceeded => "memory quota exceeded",
            HostError::MalformedMessage => "malformed message",
            HostError::ServiceFault => "service trapped; its domain was terminated",
            HostError::NameTaken => "name already registered",
            HostError::NotPermitted => "operation not granted to this component",
            HostError::InvalidArgument => "invalid argument",
            HostError::UnknownMethod => "service does not implement that method",
            HostError::BadRequest => "service could not decode the request",
            HostError::ServiceBusy => "every service thread of the target is busy",
            HostError::Revoked => "memory object revoked",
            HostError::ReadOnly => "memory object is read-only",
            HostError::MustWait => "the service may wait: call it with portal_call_waiting",
        }
    }
}

/// FNV-1a's starting value (32 bits).
pub const FNV_OFFSET_BASIS: u32 = 0x811c_9dc5;
/// FNV-1a's multiplier (32 bits).
pub const FNV_PRIME: u32 = 0x0100_0193;

/// FNV-1a over `bytes`: the stable 32-bit identifier of interfaces and methods.
///
/// Interfaces are identified by `fnv1a("Name@major")` and methods by `fnv1a("method")`, so no
/// number is ever assigned by hand.
pub const fn fnv1a(bytes: &[u8]) -> u32 {
    let mut hash: u32 = FNV_OFFSET_BASIS;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u32;
        hash = hash.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: &[u8], handles: &[u32]) -> ([u8; 128], usize) {
        let mut buf = [0u8; 128];
        buf[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        buf[4..4 + payload.len()].copy_from_slice(payload);
        let at = 4 + payload.len();
        buf[at..at + 4].copy_from_slice(&(handles.len() as u32).to_le_bytes());
        for (i, h) in handles.iter().enumerate() {
            buf[at + 4 + 4 * i..at + 8 + 4 * i].copy_from_slice(&h.to_le_bytes());
        }
        (buf, at + 4 + 4 * handles.len())
    }

    #[test]
    fn layouts_round_trip_and_lies_are_caught() {
        let (buf, len) = message(b"hello", &[7, 9]);
        let layout = MessageLayout::parse(&buf, len).unwrap();
        assert_eq!((layout.payload_len, layout.handle_count, layout.handles_offset()), (5, 2, 13));
        assert_eq!(MessageLayout::parse(&buf, len - 1), Err(HostError::MalformedMessage));
        assert_eq!(MessageLayout::parse(&buf, len + 4), Err(HostError::MalformedMessage));
        assert_eq!(MessageLayout::check(u32::MAX, u32::MAX, 8), Err(HostError::MalformedMessage));
        let too_many = [0u32; MAX_MESSAGE_HANDLES + 1];
        let (buf, len) = message(b"", &too_many);
        assert_eq!(MessageLayout::parse(&buf, len), Err(HostError::MalformedMessage));
    }

    /// Random headers never panic the parser, and an accepted layout always fits its length.
    #[test]
    fn survives_random_headers() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut buf = [0u8; 96];
        for _ in 0..200_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            buf[(seed % 96) as usize] = (seed >> 40) as u8;
            buf[0] = (seed >> 8) as u8 % 100;
            let len = (seed >> 20) as usize % 100;
            if let Ok(layout) = MessageLayout::parse(&buf, len) {
                assert_eq!(layout.total_len(), len);
            }
        }
    }

    #[test]
    fn memory_fault_messages_encode_as_the_sdk_does() {
        assert_eq!(memory_fault::request(7, 0x0102), [7, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(memory_fault::granted(&[0, 0, 0, 16, 0, 0, 0, 0, 0]), 1 << 20);
        assert_eq!(memory_fault::granted(&[0, 1, 2]), 0, "a short reply grants nothing");
        assert_eq!(memory_fault::granted(&[1, 0, 0, 16, 0, 0, 0, 0, 0]), 0, "an error grants nothing");
        assert_eq!(memory_fault::granted(&[]), 0);
    }

    #[test]
    fn disk_codes_round_trip() {
        for op in [DiskOperation::Read, DiskOperation::Write, DiskOperation::Flush] {
            assert_eq!(DiskOperation::from_code(op as u32), Some(op));
        }
        assert_eq!(DiskOperation::from_code(3), None);
        let done = DiskCompletion { id: 41, failed: true };
        assert_eq!(done.encode(), 83);
        assert_eq!(DiskCompletion::decode(83), Some(done));
        assert_eq!(DiskCompletion::decode(HostError::NotFound as i64), None);
    }

    #[test]
    fn error_codes_decode() {
        for e in HostError::ALL {
            assert_eq!(HostError::from_code(e as i64), Some(e));
        }
        assert_eq!(HostError::from_code(0), None);
        assert_eq!(HostError::from_code(-999), None);
    }
}
