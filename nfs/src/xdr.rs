//! XDR, the External Data Representation (RFC 4506): big-endian 4-byte units, opaques and
//! strings padded to a multiple of four.
//!
//! [`Decoder`] reads from a borrowed buffer and checks every length against what is left of it
//! before it allocates or slices, so a length beyond the buffer, a string without its end or an
//! opaque over its declared maximum is an [`XdrError`], never a panic and never an allocation
//! larger than the input.

use alloc::vec::Vec;
use core::fmt;

/// Why decoding failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdrError {
    /// The buffer ended before the item did.
    Truncated,
    /// A length over the item's declared maximum.
    TooLong,
    /// A discriminant or enumeration value the type does not have.
    BadValue,
}

impl fmt::Display for XdrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XdrError::Truncated => "XDR item runs past the end of the message",
            XdrError::TooLong => "XDR length over the item's maximum",
            XdrError::BadValue => "XDR value out of the type's range",
        })
    }
}

/// The padding that brings `len` to a multiple of four.
pub const fn padding(len: usize) -> usize {
    (4 - (len & 3)) & 3
}

/// Appends XDR items to a byte vector.
#[derive(Debug, Default, Clone)]
pub struct Encoder {
    bytes: Vec<u8>,
}

impl Encoder {
    /// An empty encoder.
    pub fn new() -> Encoder {
        Encoder { bytes: Vec::new() }
    }

    /// An encoder appending to `bytes` (whose contents stay in front).
    pub fn from_vec(bytes: Vec<u8>) -> Encoder {
        Encoder { bytes }
    }

    /// The bytes encoded so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many bytes have been encoded.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing has been encoded.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Forgets what was encoded, keeping the allocation.
    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    /// Forgets what was encoded after the first `len` bytes (a reply replaced by an error, after
    /// a record mark that stays).
    pub fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
    }

    /// The encoded bytes.
    pub fn into_vec(self) -> Vec<u8> {
        self.bytes
    }

    /// Overwrites the 4-byte unit at `at` (an offset returned by [`Encoder::len`] before it was
    /// written) with `value`, for a count known only after what follows was encoded.
    ///
    /// # Panics
    ///
    /// If `at + 4` is beyond what was encoded (a bug of the caller).
    pub fn patch_u32(&mut self, at: usize, value: u32) {
        self.bytes[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }

    /// An unsigned integer.
    pub fn u32(&mut self, value: u32) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// A signed integer.
    pub fn i32(&mut self, value: i32) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// An unsigned hyper integer.
    pub fn u64(&mut self, value: u64) {
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// A boolean (0 or 1).
    pub fn bool(&mut self, value: bool) {
        self.u32(value as u32);
    }

    /// Fixed-length opaque data: the bytes, padded.
    pub fn fixed_opaque(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
        self.bytes.extend_from_slice(&[0; 3][..padding(data.len())]);
    }

    /// Variable-length opaque data or a string: the length, the bytes, padded.
    ///
    /// # Panics
    ///
    /// If `data` is 4 GiB or longer, which XDR cannot express.
    pub fn opaque(&mut self, data: &[u8]) {
        self.u32(u32::try_from(data.len()).expect("an XDR opaque is shorter than 4 GiB"));
        self.fixed_opaque(data);
    }

    /// A variable-length array of unsigned integers.
    pub fn u32_array(&mut self, values: &[u32]) {
        self.u32(values.len() as u32);
        for &value in values {
            self.u32(value);
        }
    }
}

/// Reads XDR items from a borrowed buffer, front to back.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Decoder<'a> {
        Decoder { bytes, position: 0 }
    }

    /// How many bytes are left.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// Where the decoder stands, from the start of the buffer.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.position..]
    }

    /// Takes the next `len` bytes.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], XdrError> {
        if len > self.remaining() {
            return Err(XdrError::Truncated);
        }
        let taken = &self.bytes[self.position..self.position + len];
        self.position += len;
        Ok(taken)
    }

    /// An unsigned integer.
    pub fn u32(&mut self) -> Result<u32, XdrError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A signed integer.
    pub fn i32(&mut self) -> Result<i32, XdrError> {
        self.u32().map(|v| v as i32)
    }

    /// An unsigned hyper integer.
    pub fn u64(&mut self) -> Result<u64, XdrError> {
        let b = self.take(8)?;
        Ok(u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    /// A boolean: 0 or 1, anything else is [`XdrError::BadValue`].
    pub fn bool(&mut self) -> Result<bool, XdrError> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(XdrError::BadValue),
        }
    }

    /// Fixed-length opaque data of `len` bytes and its padding.
    pub fn fixed_opaque(&mut self, len: usize) -> Result<&'a [u8], XdrError> {
        let data = self.take(len)?;
        self.take(padding(len))?;
        Ok(data)
    }

    /// `N` bytes of fixed-length opaque data, copied.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], XdrError> {
        let mut out = [0; N];
        out.copy_from_slice(self.fixed_opaque(N)?);
        Ok(out)
    }

    /// Variable-length opaque data or a string of at most `max` bytes, borrowed.
    pub fn opaque(&mut self, max: usize) -> Result<&'a [u8], XdrError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(XdrError::TooLong);
        }
        self.fixed_opaque(len)
    }

    /// Variable-length opaque data of at most `max` bytes, copied.
    pub fn opaque_vec(&mut self, max: usize) -> Result<Vec<u8>, XdrError> {
        self.opaque(max).map(<[u8]>::to_vec)
    }

    /// A variable-length array of at most `max` unsigned integers.
    pub fn u32_array(&mut self, max: usize) -> Result<Vec<u32>, XdrError> {
        let count = self.u32()? as usize;
        if count > max {
            return Err(XdrError::TooLong);
        }
        if count > self.remaining() / 4 {
            return Err(XdrError::Truncated);
        }
        (0..count).map(|_| self.u32()).collect()
    }

    /// Fails unless every byte was read (a message with bytes after its arguments is garbage).
    pub fn finish(&self) -> Result<(), XdrError> {
        if self.remaining() == 0 { Ok(()) } else { Err(XdrError::TooLong) }
    }
}

/// A type with an XDR representation.
pub trait Xdr: Sized {
    /// Appends `self`.
    fn encode(&self, e: &mut Encoder);
    /// Reads one from `d`.
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError>;

    /// `self` encoded on its own.
    fn to_xdr(&self) -> Vec<u8> {
        let mut e = Encoder::new();
        self.encode(&mut e);
        e.into_vec()
    }

    /// One decoded from all of `bytes` (bytes left over are an error).
    fn from_xdr(bytes: &[u8]) -> Result<Self, XdrError> {
        let mut d = Decoder::new(bytes);
        let value = Self::decode(&mut d)?;
        d.finish()?;
        Ok(value)
    }
}

impl Xdr for () {
    fn encode(&self, _: &mut Encoder) {}
    fn decode(_: &mut Decoder<'_>) -> Result<Self, XdrError> {
        Ok(())
    }
}

impl Xdr for u32 {
    fn encode(&self, e: &mut Encoder) {
        e.u32(*self);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.u32()
    }
}

impl Xdr for i32 {
    fn encode(&self, e: &mut Encoder) {
        e.i32(*self);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.i32()
    }
}

impl Xdr for u64 {
    fn encode(&self, e: &mut Encoder) {
        e.u64(*self);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.u64()
    }
}

impl Xdr for bool {
    fn encode(&self, e: &mut Encoder) {
        e.bool(*self);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.bool()
    }
}

impl<const N: usize> Xdr for [u8; N] {
    fn encode(&self, e: &mut Encoder) {
        e.fixed_opaque(self);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.array()
    }
}

/// Variable-length opaque data, bounded only by the message it is read from.
impl Xdr for Vec<u8> {
    fn encode(&self, e: &mut Encoder) {
        e.opaque(self);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.opaque_vec(usize::MAX)
    }
}

/// XDR's optional data (`*T`): a boolean, then the value if it is true.
impl<T: Xdr> Xdr for Option<T> {
    fn encode(&self, e: &mut Encoder) {
        match self {
            Some(value) => {
                e.bool(true);
                value.encode(e);
            }
            None => e.bool(false),
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        Ok(if d.bool()? { Some(T::decode(d)?) } else { None })
    }
}

/// Encodes `items` as an XDR linked list (`struct item { ...; item *next; }`, the head an
/// optional pointer): for each item `TRUE` and the item, then `FALSE`.
pub fn encode_list<T: Xdr>(e: &mut Encoder, items: &[T]) {
    for item in items {
        e.bool(true);
        item.encode(e);
    }
    e.bool(false);
}

/// Decodes an XDR linked list, iteratively: every element costs at least its 4-byte marker,
/// so the count is bounded by the message's length, and no recursion grows the stack.
pub fn decode_list<T: Xdr>(d: &mut Decoder<'_>) -> Result<Vec<T>, XdrError> {
    let mut items = Vec::new();
    while d.bool()? {
        items.push(T::decode(d)?);
    }
    Ok(items)
}

/// Declares a struct whose XDR form is its fields in order.
macro_rules! xdr_struct {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$field_meta:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $crate::xdr::Xdr for $name {
            fn encode(&self, e: &mut $crate::xdr::Encoder) {
                $($crate::xdr::Xdr::encode(&self.$field, e);)*
            }
            fn decode(d: &mut $crate::xdr::Decoder<'_>) -> Result<Self, $crate::xdr::XdrError> {
                Ok($name { $($field: <$ty as $crate::xdr::Xdr>::decode(d)?,)* })
            }
        }
    };
}

/// Declares a C-like enumeration with its XDR values; other values decode to
/// [`XdrError::BadValue`].
macro_rules! xdr_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$variant_meta:meta])* $variant:ident = $value:expr),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum $name {
            $($(#[$variant_meta])* $variant = $value,)*
        }

        impl $name {
            /// The variant of the value `value`, if there is one.
            pub fn from_u32(value: u32) -> Option<$name> {
                match value {
                    $($value => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl $crate::xdr::Xdr for $name {
            fn encode(&self, e: &mut $crate::xdr::Encoder) {
                e.u32(*self as u32);
            }
            fn decode(d: &mut $crate::xdr::Decoder<'_>) -> Result<Self, $crate::xdr::XdrError> {
                $name::from_u32(d.u32()?).ok_or($crate::xdr::XdrError::BadValue)
            }
        }
    };
}

pub(crate) use {xdr_enum, xdr_struct};

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn integers_are_big_endian() {
        let mut e = Encoder::new();
        e.u32(0x0102_0304);
        e.i32(-2);
        e.u64(0x0102_0304_0506_0708);
        e.bool(true);
        assert_eq!(e.as_bytes(), [1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1]);
        let mut d = Decoder::new(e.as_bytes());
        assert_eq!(d.u32(), Ok(0x0102_0304));
        assert_eq!(d.i32(), Ok(-2));
        assert_eq!(d.u64(), Ok(0x0102_0304_0506_0708));
        assert_eq!(d.bool(), Ok(true));
        assert_eq!(d.u32(), Err(XdrError::Truncated));
    }

    /// RFC 4506 §4.10 and §4.11: length, bytes, zero padding to a multiple of four.
    #[test]
    fn opaques_and_strings_are_padded() {
        let mut e = Encoder::new();
        e.opaque(b"sillyprog");
        assert_eq!(e.as_bytes(), b"\0\0\0\x09sillyprog\0\0\0");
        e.clear();
        e.opaque(b"");
        e.fixed_opaque(b"ab");
        assert_eq!(e.as_bytes(), b"\0\0\0\0ab\0\0");
        let mut d = Decoder::new(b"\0\0\0\x09sillyprog\0\0\0");
        assert_eq!(d.opaque(16), Ok(&b"sillyprog"[..]));
        assert_eq!(d.remaining(), 0);
    }

    #[test]
    fn lengths_beyond_the_buffer_or_the_maximum_fail() {
        // A length of 4 GiB - 1 with three bytes after it: no allocation, no panic.
        assert_eq!(Decoder::new(b"\xff\xff\xff\xffabc").opaque(usize::MAX), Err(XdrError::Truncated));
        assert_eq!(Vec::<u8>::from_xdr(b"\xff\xff\xff\xffabc"), Err(XdrError::Truncated));
        // A string without its padding.
        assert_eq!(Decoder::new(b"\0\0\0\x05hello").opaque(16), Err(XdrError::Truncated));
        // Over the declared maximum.
        assert_eq!(Decoder::new(b"\0\0\0\x05hello\0\0\0").opaque(4), Err(XdrError::TooLong));
        // An array whose count exceeds the bytes left.
        assert_eq!(Decoder::new(b"\0\0\0\x10\0\0\0\x01").u32_array(16), Err(XdrError::Truncated));
        assert_eq!(Decoder::new(b"\0\0\0\x11").u32_array(16), Err(XdrError::TooLong));
        assert_eq!(Decoder::new(b"\0\0\0\x02").bool(), Err(XdrError::BadValue));
    }

    #[test]
    fn optional_data_and_lists() {
        let some: Option<u32> = Some(7);
        assert_eq!(some.to_xdr(), [0, 0, 0, 1, 0, 0, 0, 7]);
        assert_eq!(None::<u32>.to_xdr(), [0, 0, 0, 0]);
        let mut e = Encoder::new();
        encode_list(&mut e, &[1u32, 2]);
        assert_eq!(e.as_bytes(), [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0]);
        let mut d = Decoder::new(e.as_bytes());
        assert_eq!(decode_list::<u32>(&mut d), Ok(vec![1, 2]));
        // A list whose end is missing.
        let mut d = Decoder::new(&[0, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(decode_list::<u32>(&mut d), Err(XdrError::Truncated));
    }

    #[test]
    fn leftover_bytes_are_refused_by_from_xdr() {
        assert_eq!(u32::from_xdr(&[0, 0, 0, 1, 0]), Err(XdrError::TooLong));
    }
}
