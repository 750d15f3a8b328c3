//! The SDK's message decoder (`domos_sdk::wire::Decoder` and the `Wire` impls, including the ones
//! `#[derive(Wire)]` writes for the interfaces' types), built for the host: a service decodes
//! every request, and a client every reply, from a peer it need not trust.
//!
//! Input: `[type, flags, kinds…, payload…]`. `type` picks what to decode: each request and reply
//! type of the interfaces in `interfaces/`, and the SDK's own types. With bit 7 of `flags` set the
//! rest of the input is the whole message, header and handle list included, as the kernel would
//! have delivered it; otherwise bits 0–4 give a handle count, the next that many bytes give each
//! handle's object kind, and the payload is framed around them.
//!
//! The types that carry handles (memory objects, atomic variables, portals) ask the kernel about
//! them while decoding, and drop them: the host calls are answered here by a stand-in kernel
//! whose handle table holds the message's handles.
//!
//! Checks, beyond no panic:
//! * an argument a method borrows (`&str`, `&[u8]`) decodes to what its owned form (`String`,
//!   `Vec<u8>`) decodes to from the same bytes, or fails the same way, and re-encodes to them;
//! * a framed message opens iff it carries at most `MAX_MESSAGE_HANDLES` handles;
//! * what a value of a type without handles decodes from re-encodes to exactly the bytes it was
//!   read from (the encoding is canonical, and the encoder's room matches the decoder's reading);
//! * decoding, dropping the handles no value took (as a service's dispatch does) and dropping the
//!   value drops every handle of the message exactly once: none leaks, none is dropped twice,
//!   none the message did not carry.
#![no_main]

use std::cell::RefCell;
use std::collections::BTreeMap;

use domos_abi::{HostError, MAX_MESSAGE_HANDLES, MessageLayout};
use domos_interfaces::{buffer_cache, file_system, key_value_store, summarizer, table};
use domos_sdk::sync::AtomicVariable;
use domos_sdk::wire::{ArgStorage, Borrowed, Decoder, EncodeError, Encoder, Wire};
use domos_sdk::{CallError, Memory, Portal, ReadOnlyMemory};
use libfuzzer_sys::fuzz_target;

// ----- the stand-in kernel -----

thread_local! {
    /// Handles the guest holds, with how many times each was issued (once, for a real kernel).
    static HANDLES: RefCell<BTreeMap<u32, u32>> = const { RefCell::new(BTreeMap::new()) };
}

/// What a handle names, as the stand-in kernel decides from its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Object {
    Memory,
    ReadOnlyMemory,
    AtomicVariable,
    Portal,
}

fn object(handle: u32) -> Option<Object> {
    HANDLES.with(|h| h.borrow().contains_key(&handle)).then(|| {
        [Object::Memory, Object::ReadOnlyMemory, Object::AtomicVariable, Object::Portal][(handle % 4) as usize]
    })
}

/// One host call of the guest: the few that decoding values with handles makes are answered;
/// any other is a finding (decoding must not touch the kernel otherwise).
fn host_call(name: &str, args: &[u64]) -> i64 {
    let handle = args.first().copied().unwrap_or(0) as u32;
    let invalid = HostError::InvalidHandle as i64;
    match name {
        "handle_drop" => HANDLES.with(|h| {
            let mut handles = h.borrow_mut();
            match handles.get_mut(&handle) {
                Some(1) => {
                    handles.remove(&handle);
                    0
                }
                Some(count) => {
                    *count -= 1;
                    0
                }
                None => panic!("the guest dropped handle {handle:#x}, which it does not hold"),
            }
        }),
        // Length 4096 in the high bits, bit 0 set when writable.
        "memory_info" => match object(handle) {
            Some(Object::Memory) => 4096 << 2 | 1,
            Some(Object::ReadOnlyMemory) => 4096 << 2,
            _ => invalid,
        },
        "atomic_get" => match object(handle) {
            Some(Object::AtomicVariable) => 7,
            _ => invalid,
        },
        // No portal is to an object of this component instance.
        "portal_local" => match object(handle) {
            Some(Object::Portal) => HostError::NotFound as i64,
            _ => invalid,
        },
        other => panic!("decoding made the host call {other}{args:?}"),
    }
}

/// Defines every import of the `domos` host module, from the ABI's table, as a call of the
/// stand-in kernel.
macro_rules! stand_in_kernel {
    ($($family:ident: $name:ident($($param:ident: $ty:ident),*) $(-> $result:ident)?, $grant:ident, [$($flag:ident)*], $summary:literal;)*) => {
        $(
            #[unsafe(no_mangle)]
            extern "C" fn $name($($param: $ty),*) $(-> $result)? {
                let _result = host_call(stringify!($name), &[$($param as u64),*]);
                $(_result as $result)?
            }
        )*
    };
}
domos_abi::for_each_host_call!(stand_in_kernel);

// ----- decoding -----

/// What a decoded value may be checked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Handles {
    /// The type carries none: it must re-encode to the bytes it came from.
    None,
    /// The type carries some.
    Some,
}

/// Decodes a `T` from the `len`-byte message at the start of `buffer` as a service's dispatch
/// does, and checks it.
fn decode<T: Wire>(buffer: &[u8], len: usize, handles: Handles) {
    let Ok(mut decoder) = Decoder::new(buffer, len) else {
        return;
    };
    let payload_len = MessageLayout::parse(buffer, len).expect("Decoder::new opened it").payload_len;
    let value = T::decode(&mut decoder);
    let strays: Vec<u32> = decoder.untaken_handles().collect();
    for stray in strays {
        domos_sys_drop(stray);
    }
    let consumed = payload_len - decoder.remaining();
    if let (Ok(value), Handles::None) = (&value, handles) {
        assert_re_encodes(buffer, consumed, |encoder| value.encode(encoder));
    }
    drop(value);
}

/// Checks that `encode` writes the `consumed` payload bytes of `buffer` that a value was decoded
/// from, again, into exactly the room they need: header, payload and an empty handle list.
fn assert_re_encodes(buffer: &[u8], consumed: usize, encode: impl FnOnce(&mut Encoder<'_>) -> Result<(), EncodeError>) {
    let mut out = vec![0u8; MessageLayout::PAYLOAD_OFFSET + consumed + 4];
    let mut encoder = Encoder::new(&mut out);
    encode(&mut encoder).expect("a decoded value re-encodes into the room it was read from");
    let out_len = encoder.finish().expect("finish");
    assert_eq!(out_len, out.len());
    let payload = MessageLayout::PAYLOAD_OFFSET..MessageLayout::PAYLOAD_OFFSET + consumed;
    assert!(out[payload.clone()] == buffer[payload], "a decoded value re-encodes to other bytes than it was read from");
}

/// Decodes an argument a method borrows (`B`, read into an `ArgStorage` as a service's dispatch
/// does) and its owned form `O` from the same message: both succeed or both fail, with the same
/// value, and the borrowed one re-encodes to the bytes it was read from.
fn decode_borrowed<B, O>(buffer: &[u8], len: usize)
where
    B: Borrowed + PartialEq<O> + ?Sized + core::fmt::Debug,
    O: Wire + core::fmt::Debug,
{
    let (Ok(mut borrowed_decoder), Ok(mut owned_decoder)) = (Decoder::new(buffer, len), Decoder::new(buffer, len))
    else {
        return;
    };
    let mut storage = ArgStorage::new();
    let borrowed = B::decode_into(&mut storage, &mut borrowed_decoder);
    let owned = O::decode(&mut owned_decoder);
    for stray in owned_decoder.untaken_handles().collect::<Vec<_>>() {
        domos_sys_drop(stray);
    }
    match (borrowed, owned) {
        (Ok(borrowed), Ok(owned)) => {
            assert!(*borrowed == owned, "borrowed {borrowed:?} and owned {owned:?} differ");
            assert_eq!(borrowed_decoder.remaining(), owned_decoder.remaining());
            let consumed =
                MessageLayout::parse(buffer, len).expect("opened").payload_len - borrowed_decoder.remaining();
            assert_re_encodes(buffer, consumed, |encoder| borrowed.encode_borrowed(encoder));
        }
        (Err(b), Err(o)) => assert_eq!(b, o, "borrowed and owned decoding fail differently"),
        (b, o) => panic!("borrowed decoding gave {b:?}, owned {o:?}"),
    }
}

/// The SDK drops stray handles with this host call (`domos_sys::handle_drop`).
fn domos_sys_drop(handle: u32) {
    host_call("handle_drop", &[u64::from(handle)]);
}

/// The types a portal message can carry: every request (a tuple of the arguments) and every
/// reply of the interfaces in `interfaces/`, and the SDK's own `Wire` types.
macro_rules! types {
    ($selector:expr, $buffer:expr, $len:expr; none: [$($plain:ty),* $(,)?]; some: [$($carrying:ty),* $(,)?];
     borrowed: [$($borrowed:ty => $owned:ty),* $(,)?] $(;)?) => {{
        let plain: &[fn(&[u8], usize)] = &[$(|b, l| decode::<$plain>(b, l, Handles::None)),*];
        let carrying: &[fn(&[u8], usize)] = &[$(|b, l| decode::<$carrying>(b, l, Handles::Some)),*];
        let borrowed: &[fn(&[u8], usize)] = &[$(|b, l| decode_borrowed::<$borrowed, $owned>(b, l)),*];
        let all: Vec<fn(&[u8], usize)> = plain.iter().chain(carrying).chain(borrowed).copied().collect();
        all[$selector as usize % all.len()]($buffer, $len)
    }};
}

fn decode_any(selector: u8, buffer: &[u8], len: usize) {
    use file_system::{Entry, FsError, Stat, Usage};
    use key_value_store::KvError;
    use summarizer::{Summary, SummaryError};
    use table::{Table, TableInfo};
    types!(selector, buffer, len;
        none: [
            u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, bool, (),
            String, Vec<u8>, Vec<u16>, Vec<u32>, Vec<u64>, Vec<i64>, Vec<f64>, Vec<bool>, Vec<()>, Vec<String>,
            Vec<Vec<u8>>, Option<String>, Option<Option<u32>>, Box<u64>, Result<u32, String>, (u32, u32, u32),
            (String, u64, u32), (String, u64, Vec<u8>), (String, u64), (String, String), (u64, u32), (u64, Vec<u8>),
            (Vec<u32>,), (Vec<u64>,), (u32, u64), (u8, u16, u32, u64, String),
            CallError, Result<(), CallError>, Result<u32, CallError>, Result<u64, CallError>,
            Result<Vec<u8>, CallError>, Result<Vec<u32>, CallError>,
            file_system::FileKind, Stat, Entry, Usage, FsError, Result<Stat, FsError>, Result<Vec<Entry>, FsError>,
            Result<Vec<u8>, FsError>, Result<(), FsError>, Result<String, FsError>, Result<Usage, FsError>,
            KvError, table::Entry, TableInfo, Result<Option<String>, KvError>, Result<Vec<table::Entry>, KvError>,
            Result<TableInfo, KvError>, Result<Vec<TableInfo>, KvError>,
            Summary, SummaryError, Result<Summary, SummaryError>,
            buffer_cache::CacheStatistics, Result<buffer_cache::CacheStatistics, CallError>,
        ];
        some: [
            Memory, ReadOnlyMemory, AtomicVariable, Portal<dyn Table>, Option<Memory>, Vec<ReadOnlyMemory>,
            (u64, u32, Memory, AtomicVariable), (u64, u32, ReadOnlyMemory, AtomicVariable), (AtomicVariable,),
            (ReadOnlyMemory,), (Memory, u64, u32), (Portal<dyn Table>, String, u32),
            Result<Portal<dyn Table>, KvError>, Result<ReadOnlyMemory, CallError>,
        ];
        borrowed: [str => String, [u8] => Vec<u8>];
    )
}

fuzz_target!(|data: &[u8]| {
    let [selector, flags, rest @ ..] = data else {
        return;
    };
    HANDLES.with(|h| h.borrow_mut().clear());
    let (buffer, len) = if flags & 0x80 != 0 {
        // The whole message as delivered: the kernel gives the receiver fresh, distinct, non-zero
        // handles, so a message with others cannot arrive.
        let Ok(layout) = MessageLayout::parse(rest, rest.len()) else {
            return decode_any(*selector, rest, rest.len());
        };
        let handles: Vec<u32> = (0..layout.handle_count)
            .map(|i| domos_abi::read_u32(rest, layout.handles_offset() + 4 * i).expect("inside the message"))
            .collect();
        let mut distinct = handles.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != handles.len() || distinct.first() == Some(&0) {
            return;
        }
        (rest.to_vec(), rest.len())
    } else {
        let count = usize::from(flags & 0x1f);
        let Some((kinds, payload)) = rest.split_at_checked(count) else {
            return;
        };
        let mut message = Vec::with_capacity(8 + payload.len() + 4 * count);
        message.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        message.extend_from_slice(payload);
        message.extend_from_slice(&(count as u32).to_le_bytes());
        for (i, kind) in kinds.iter().enumerate() {
            // Distinct, non-zero, and the kind the input chose (`object`).
            let handle = ((i as u32 + 1) << 8) | u32::from(kind % 4);
            message.extend_from_slice(&handle.to_le_bytes());
        }
        let len = message.len();
        assert_eq!(
            Decoder::new(&message, len).is_ok(),
            count <= MAX_MESSAGE_HANDLES,
            "a well-framed message opens iff its handles are few enough"
        );
        (message, len)
    };
    let layout = MessageLayout::parse(&buffer, len);
    if let Ok(layout) = layout {
        HANDLES.with(|h| {
            let mut table = h.borrow_mut();
            for i in 0..layout.handle_count {
                let handle = domos_abi::read_u32(&buffer, layout.handles_offset() + 4 * i).expect("inside");
                *table.entry(handle).or_insert(0) += 1;
            }
        });
    }
    decode_any(*selector, &buffer, len);
    if layout.is_ok() {
        HANDLES.with(|h| {
            let left = h.borrow();
            assert!(left.is_empty(), "handles the guest neither kept nor dropped: {left:?}");
        });
    }
});
