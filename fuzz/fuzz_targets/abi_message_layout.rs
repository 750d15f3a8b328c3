//! `MessageLayout::parse` and `check`, which the kernel runs on every portal message a guest
//! hands it and the SDK on every message it receives.
//!
//! Input: `[len: u16 LE, bytes…]`: the message length the caller claims, and its buffer.
//!
//! Checks, beyond no panic: `parse` accepts exactly the messages the layout describes, written
//! out here from the documented format (`[payload_len][payload][handle_count][handles]`, at most
//! `MAX_MESSAGE_HANDLES` handles, filling exactly `len` bytes of the buffer); an accepted layout
//! has `total_len() == len`, its fields are the header's words, and its handles end at `len`.
//! `check` agrees with the same arithmetic done in `u128` for lengths and counts drawn from the
//! input.
#![no_main]

use domos_abi::{HostError, MAX_MESSAGE_HANDLES, MessageLayout};
use libfuzzer_sys::fuzz_target;

fn word(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// The layout of the `len`-byte message at the start of `bytes`, from the format alone.
fn expected(bytes: &[u8], len: usize) -> Option<(usize, usize)> {
    let message = bytes.get(..len)?;
    let payload_len = word(message, 0)? as usize;
    let handle_count = word(message, 4 + payload_len)? as usize;
    let total = 8u128 + payload_len as u128 + 4 * handle_count as u128;
    (handle_count <= MAX_MESSAGE_HANDLES && total == len as u128).then_some((payload_len, handle_count))
}

fuzz_target!(|data: &[u8]| {
    let [lo, hi, bytes @ ..] = data else {
        return;
    };
    let len = usize::from(u16::from_le_bytes([*lo, *hi]));
    let parsed = MessageLayout::parse(bytes, len);
    match (parsed, expected(bytes, len)) {
        (Ok(layout), Some((payload_len, handle_count))) => {
            assert_eq!((layout.payload_len, layout.handle_count), (payload_len, handle_count));
            assert_eq!(layout.total_len(), len);
            assert_eq!(layout.handles_offset(), MessageLayout::PAYLOAD_OFFSET + payload_len + 4);
            assert_eq!(layout.handles_offset() + 4 * layout.handle_count, len);
            assert!(len <= bytes.len());
        }
        (Err(error), None) => assert_eq!(error, HostError::MalformedMessage),
        (parsed, expected) => panic!("parse gave {parsed:?}, the format says {expected:?}"),
    }
    // `check` on numbers drawn from the input (the kernel calls it with words a guest wrote).
    if let (Some(payload_len), Some(handle_count), Some(claimed)) = (word(bytes, 0), word(bytes, 4), word(bytes, 8)) {
        let len = claimed as usize | (usize::from(*lo) << 32);
        let fits = (handle_count as usize) <= MAX_MESSAGE_HANDLES
            && 8 + u128::from(payload_len) + 4 * u128::from(handle_count) == len as u128;
        let checked = MessageLayout::check(payload_len, handle_count, len);
        assert_eq!(checked.is_ok(), fits, "check({payload_len}, {handle_count}, {len})");
        if let Ok(layout) = checked {
            assert_eq!(layout.total_len(), len);
        }
    }
});
