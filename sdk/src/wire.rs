//! The message encoding of portal calls.
//!
//! Values are written in declaration order, little-endian, with `u32` lengths before strings and
//! sequences; portals travel out of band as handles (see `domos_abi::MessageLayout`). `#[derive(Wire)]`
//! implements [`Wire`] for structs and enums. Decoding checks every length against the bytes that
//! are left, so a malformed or hostile message fails with a [`DecodeError`] and never allocates
//! more than it carries.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use domos_abi::{MAX_MESSAGE_HANDLES, MessageLayout};
pub use domos_sys::ArgStorage;

/// A value that can cross a portal.
pub trait Wire: Sized {
    /// Appends `self` to the message.
    ///
    /// # Errors
    /// When the message would exceed the buffer (the per-call quota) or carry too many handles.
    fn encode(&self, encoder: &mut Encoder<'_>) -> Result<(), EncodeError>;
    /// Reads a value from the message.
    ///
    /// # Errors
    /// When the message is truncated or malformed.
    fn decode(decoder: &mut Decoder<'_>) -> Result<Self, DecodeError>;

    /// Appends a sequence of values (numbers override this with one pass over one range).
    ///
    /// # Errors
    /// As `encode`.
    fn encode_all(items: &[Self], encoder: &mut Encoder<'_>) -> Result<(), EncodeError> {
        items.iter().try_for_each(|item| item.encode(encoder))
    }

    /// Reads `count` values (numbers override this with one pass over one range).
    ///
    /// # Errors
    /// As `decode`.
    fn decode_all(count: usize, decoder: &mut Decoder<'_>) -> Result<Vec<Self>, DecodeError> {
        // `count` is bounded by the bytes left, not by what they decode to: reserve no more
        // memory than the message has bytes, so that a hostile count cannot make the receiver
        // allocate many times the message's size before decoding fails.
        let reserve = count.min(decoder.remaining() / core::mem::size_of::<Self>().max(1));
        let mut items = Vec::with_capacity(reserve);
        for _ in 0..count {
            items.push(Self::decode(decoder)?);
        }
        Ok(items)
    }
}

/// The message does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// More bytes than the message buffer (the per-call quota) holds.
    TooLarge,
    /// More than `MAX_MESSAGE_HANDLES` portals.
    TooManyHandles,
    /// A portal could not be exported.
    Export,
}

/// The message is malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The message ended early.
    Truncated,
    /// A value is invalid: bad UTF-8, an unknown enum tag, a handle index out of range.
    Invalid,
}

/// Writes a message into a buffer: payload first, handles appended by [`Encoder::finish`].
///
/// A message owns the handles it carries: each portal encoded into it is a fresh handle that
/// the kernel moves to the receiver, so the sender may drop its own portal at once. A message
/// that is never finished drops them again. Handles are staged at the end of the buffer while
/// the payload grows from the front, and moved behind the payload by `finish`.
pub struct Encoder<'a> {
    buf: &'a mut [u8],
    pos: usize,
    handle_count: usize,
    finished: bool,
}

impl Drop for Encoder<'_> {
    fn drop(&mut self) {
        if !self.finished {
            for i in 0..self.handle_count {
                domos_sys::handle_drop(self.staged(i));
            }
        }
    }
}

impl<'a> Encoder<'a> {
    /// Starts a message in `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Encoder { buf, pos: MessageLayout::PAYLOAD_OFFSET, handle_count: 0, finished: false }
    }

    /// Where staged handle `i` lies.
    fn staged_at(&self, i: usize) -> usize {
        self.buf.len() - 4 * (i + 1)
    }

    fn staged(&self, i: usize) -> u32 {
        domos_abi::read_u32(self.buf, self.staged_at(i)).unwrap_or(0)
    }

    /// Bytes the payload may still use: room is kept for the handle count and the handles.
    fn room(&self) -> usize {
        self.buf.len().saturating_sub(self.pos + 4 + 8 * self.handle_count)
    }

    /// Appends raw bytes.
    ///
    /// # Errors
    /// `TooLarge` when they do not fit.
    pub fn bytes(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        self.space(bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    /// Appends `n` bytes for the caller to fill.
    ///
    /// # Errors
    /// `TooLarge` when they do not fit.
    pub fn space(&mut self, n: usize) -> Result<&mut [u8], EncodeError> {
        if n > self.room() {
            return Err(EncodeError::TooLarge);
        }
        let start = self.pos;
        self.pos += n;
        Ok(&mut self.buf[start..start + n])
    }

    /// Appends a copy of `handle` that the message owns; the payload records its index in the
    /// handle list.
    ///
    /// # Errors
    /// `TooManyHandles` past `MAX_MESSAGE_HANDLES`; `TooLarge` when it does not fit; `Export`
    /// for a handle the kernel refuses.
    pub fn handle(&mut self, handle: u32) -> Result<(), EncodeError> {
        if self.handle_count == MAX_MESSAGE_HANDLES {
            return Err(EncodeError::TooManyHandles);
        }
        if self.room() < 8 + 4 {
            return Err(EncodeError::TooLarge);
        }
        let owned = domos_sys::handle_dup(handle);
        if owned < 0 {
            return Err(EncodeError::Export);
        }
        let at = self.staged_at(self.handle_count);
        self.buf[at..at + 4].copy_from_slice(&(owned as u32).to_le_bytes());
        self.handle_count += 1;
        ((self.handle_count - 1) as u32).encode(self)
    }

    /// Writes the header and moves the handle list behind the payload; returns the message
    /// length.
    ///
    /// # Errors
    /// Never in practice: `bytes` and `handle` keep room for the handle list.
    pub fn finish(mut self) -> Result<usize, EncodeError> {
        let payload_len = self.pos - MessageLayout::PAYLOAD_OFFSET;
        self.buf[..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
        let count = self.handle_count;
        self.buf[self.pos..self.pos + 4].copy_from_slice(&(count as u32).to_le_bytes());
        for i in 0..count {
            let handle = self.staged(i);
            let at = self.pos + 4 + 4 * i;
            self.buf[at..at + 4].copy_from_slice(&handle.to_le_bytes());
        }
        self.finished = true;
        Ok(self.pos + 4 + 4 * count)
    }
}

/// Reads a message: the payload in order, handles by index.
pub struct Decoder<'a> {
    payload: &'a [u8],
    pos: usize,
    /// The handle section, `u32`s read when a value takes one.
    handles: &'a [u8],
    handle_count: usize,
    taken: u32,
}

impl<'a> Decoder<'a> {
    /// Opens the `len`-byte message at the start of `buf`.
    ///
    /// # Errors
    /// `Invalid` when the layout is malformed.
    pub fn new(buf: &'a [u8], len: usize) -> Result<Self, DecodeError> {
        let layout = MessageLayout::parse(buf, len).map_err(|_| DecodeError::Invalid)?;
        let payload = &buf[MessageLayout::PAYLOAD_OFFSET..MessageLayout::PAYLOAD_OFFSET + layout.payload_len];
        let handles = &buf[layout.handles_offset()..len];
        Ok(Decoder { payload, pos: 0, handles, handle_count: layout.handle_count, taken: 0 })
    }

    /// Takes the next `n` payload bytes.
    ///
    /// # Errors
    /// `Truncated` when fewer are left.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let bytes = self.payload.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(bytes)
    }

    /// Payload bytes not yet read: the most elements a sequence can still claim.
    pub fn remaining(&self) -> usize {
        self.payload.len() - self.pos
    }

    /// Takes the handle whose index is next in the payload; each handle can be taken once.
    ///
    /// # Errors
    /// `Invalid` for an index out of range or taken twice.
    pub fn handle(&mut self) -> Result<u32, DecodeError> {
        let index = u32::decode(self)? as usize;
        if index >= self.handle_count || self.taken & (1 << index) != 0 {
            return Err(DecodeError::Invalid);
        }
        self.taken |= 1 << index;
        domos_abi::read_u32(self.handles, 4 * index).ok_or(DecodeError::Truncated)
    }

    /// Handles of the message that no decoded value took (to be dropped).
    pub fn untaken_handles(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.handle_count)
            .filter(|i| self.taken & (1 << i) == 0)
            .filter_map(|i| domos_abi::read_u32(self.handles, 4 * i))
    }
}

macro_rules! wire_int {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
                e.bytes(&self.to_le_bytes())
            }
            fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
                let b = d.bytes(core::mem::size_of::<$t>())?;
                let mut a = [0u8; core::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                Ok(<$t>::from_le_bytes(a))
            }
            // Sequences of numbers in one pass over one range, which the compiler turns into
            // a plain copy on a little-endian machine.
            fn encode_all(items: &[Self], e: &mut Encoder<'_>) -> Result<(), EncodeError> {
                const SIZE: usize = core::mem::size_of::<$t>();
                let out = e.space(items.len().checked_mul(SIZE).ok_or(EncodeError::TooLarge)?)?;
                for (bytes, item) in out.chunks_exact_mut(SIZE).zip(items) {
                    bytes.copy_from_slice(&item.to_le_bytes());
                }
                Ok(())
            }
            fn decode_all(count: usize, d: &mut Decoder<'_>) -> Result<Vec<Self>, DecodeError> {
                const SIZE: usize = core::mem::size_of::<$t>();
                let bytes = d.bytes(count.checked_mul(SIZE).ok_or(DecodeError::Truncated)?)?;
                Ok(bytes
                    .chunks_exact(SIZE)
                    .map(|b| {
                        let mut a = [0u8; SIZE];
                        a.copy_from_slice(b);
                        <$t>::from_le_bytes(a)
                    })
                    .collect())
            }
        }
    )*};
}
wire_int!(u16, u32, u64, i8, i16, i32, i64, f32, f64);

impl Wire for u8 {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        e.bytes(&[*self])
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(d.bytes(1)?[0])
    }
    fn encode_all(items: &[u8], e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        e.bytes(items)
    }
    fn decode_all(count: usize, d: &mut Decoder<'_>) -> Result<Vec<u8>, DecodeError> {
        Ok(d.bytes(count)?.to_vec())
    }
}

impl Wire for bool {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        (*self as u8).encode(e)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        match u8::decode(d)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid),
        }
    }
}

impl Wire for () {
    fn encode(&self, _: &mut Encoder<'_>) -> Result<(), EncodeError> {
        Ok(())
    }
    fn decode(_: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        Ok(())
    }
}

/// Reads a `u32` length and checks that the message can still hold that many elements.
fn decode_len(d: &mut Decoder<'_>) -> Result<usize, DecodeError> {
    let len = u32::decode(d)? as usize;
    if len > d.remaining() {
        return Err(DecodeError::Truncated);
    }
    Ok(len)
}

impl Wire for String {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        self.as_str().encode_borrowed(e)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let len = decode_len(d)?;
        let bytes = d.bytes(len)?;
        core::str::from_utf8(bytes).map(String::from).map_err(|_| DecodeError::Invalid)
    }
}

/// A type an interface method may take by reference (`&str`, `&[u8]`). The caller encodes the
/// argument from its borrow, so it keeps its own value; the service's dispatch copies it out of
/// the message into an [`ArgStorage`] in its own frame, on the stack when it is small, and lends
/// the method the copy: no allocation on either side, and the message buffer is free for the
/// method's own calls. On the wire a borrowed argument is its owned form (`String`, `Vec<u8>`),
/// so the two are interchangeable between caller and service.
pub trait Borrowed {
    /// Appends the value, encoded as its owned form.
    ///
    /// # Errors
    /// `TooLarge` when it does not fit.
    fn encode_borrowed(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError>;
    /// Reads the next value into `storage` and lends it.
    ///
    /// # Errors
    /// `Truncated` when the message ends early; `Invalid` for a string that is not UTF-8.
    fn decode_into<'s>(storage: &'s mut ArgStorage, d: &mut Decoder<'_>) -> Result<&'s Self, DecodeError>;
}

impl Borrowed for [u8] {
    fn encode_borrowed(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        (u32::try_from(self.len()).map_err(|_| EncodeError::TooLarge)?).encode(e)?;
        e.bytes(self)
    }
    fn decode_into<'s>(storage: &'s mut ArgStorage, d: &mut Decoder<'_>) -> Result<&'s Self, DecodeError> {
        let len = decode_len(d)?;
        Ok(storage.keep_bytes(d.bytes(len)?))
    }
}

impl Borrowed for str {
    fn encode_borrowed(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        self.as_bytes().encode_borrowed(e)
    }
    fn decode_into<'s>(storage: &'s mut ArgStorage, d: &mut Decoder<'_>) -> Result<&'s Self, DecodeError> {
        let len = decode_len(d)?;
        let text = core::str::from_utf8(d.bytes(len)?).map_err(|_| DecodeError::Invalid)?;
        Ok(storage.keep_str(text))
    }
}

impl<T: Wire> Wire for Vec<T> {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        (self.len() as u32).encode(e)?;
        T::encode_all(self, e)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        let len = decode_len(d)?;
        T::decode_all(len, d)
    }
}

impl<T: Wire> Wire for Box<T> {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        (**self).encode(e)
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        T::decode(d).map(Box::new)
    }
}

impl<T: Wire> Wire for Option<T> {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        match self {
            None => 0u8.encode(e),
            Some(v) => {
                1u8.encode(e)?;
                v.encode(e)
            }
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        match u8::decode(d)? {
            0 => Ok(None),
            1 => T::decode(d).map(Some),
            _ => Err(DecodeError::Invalid),
        }
    }
}

impl<T: Wire, E: Wire> Wire for Result<T, E> {
    fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
        match self {
            Ok(v) => {
                0u8.encode(e)?;
                v.encode(e)
            }
            Err(err) => {
                1u8.encode(e)?;
                err.encode(e)
            }
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
        match u8::decode(d)? {
            0 => T::decode(d).map(Ok),
            1 => E::decode(d).map(Err),
            _ => Err(DecodeError::Invalid),
        }
    }
}

macro_rules! wire_tuple {
    ($($name:ident)+) => {
        impl<$($name: Wire),+> Wire for ($($name,)+) {
            #[allow(non_snake_case, reason = "the type parameters name the fields")]
            fn encode(&self, e: &mut Encoder<'_>) -> Result<(), EncodeError> {
                let ($($name,)+) = self;
                $($name.encode(e)?;)+
                Ok(())
            }
            fn decode(d: &mut Decoder<'_>) -> Result<Self, DecodeError> {
                Ok(($($name::decode(d)?,)+))
            }
        }
    };
}
wire_tuple!(A);
wire_tuple!(A B);
wire_tuple!(A B C);
wire_tuple!(A B C D);
wire_tuple!(A B C D F);

#[cfg(test)]
mod tests {
    use super::*;

    /// The message `encode` writes, as the receiver gets it.
    fn message(encode: impl FnOnce(&mut Encoder<'_>) -> Result<(), EncodeError>) -> Vec<u8> {
        let mut buf = alloc::vec![0u8; 1024];
        let mut encoder = Encoder::new(&mut buf);
        encode(&mut encoder).unwrap();
        let len = encoder.finish().unwrap();
        buf.truncate(len);
        buf
    }

    #[test]
    fn a_borrowed_argument_travels_as_its_owned_form() {
        let text = "a b/back\\slash x\"y \u{e9}";
        let owned = message(|e| String::from(text).encode(e));
        assert_eq!(message(|e| text.encode_borrowed(e)), owned);
        let mut storage = ArgStorage::new();
        let mut decoder = Decoder::new(&owned, owned.len()).unwrap();
        assert_eq!(str::decode_into(&mut storage, &mut decoder), Ok(text));
        assert_eq!(decoder.remaining(), 0);

        let bytes: Vec<u8> = (0..=255).chain(0..10).collect();
        let owned = message(|e| bytes.encode(e));
        assert_eq!(message(|e| bytes.as_slice().encode_borrowed(e)), owned);
        let mut storage = ArgStorage::new();
        let mut decoder = Decoder::new(&owned, owned.len()).unwrap();
        assert_eq!(<[u8]>::decode_into(&mut storage, &mut decoder), Ok(&bytes[..]));
    }

    #[test]
    fn a_borrowed_string_that_is_not_utf8_or_runs_past_the_message_is_refused() {
        let not_utf8 = message(|e| [0xffu8, 0xfe].encode_borrowed(e));
        let mut decoder = Decoder::new(&not_utf8, not_utf8.len()).unwrap();
        assert_eq!(str::decode_into(&mut ArgStorage::new(), &mut decoder), Err(DecodeError::Invalid));
        // A length of 200 with 3 bytes behind it.
        let short = message(|e| {
            200u32.encode(e)?;
            e.bytes(b"abc")
        });
        let mut decoder = Decoder::new(&short, short.len()).unwrap();
        assert_eq!(str::decode_into(&mut ArgStorage::new(), &mut decoder), Err(DecodeError::Truncated));
    }
}
