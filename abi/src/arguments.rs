//! How a component's arguments travel: the `args` host call copies one byte string that
//! holds the configured list.

/// The text of the encoding's documentation, which the C header and the reference repeat.
macro_rules! arguments_doc {
    () => {
        "A component's arguments (the `args` of its `[[domain.component]]`) reach it as a list of \
         byte strings, encoded as `[len: u32][len bytes]` for each item in order, with `len` \
         little-endian and nothing between or after the items; an empty list is zero bytes. Items \
         are bytes, not text: they may hold any byte, white space and non-UTF-8 bytes included."
    };
}

/// How the `args` host call encodes the argument list, for people and other languages' headers.
pub const ARGUMENTS_DOC: &str = arguments_doc!();

/// Appends the encoding of `items` to `out`.
///
#[doc = arguments_doc!()]
///
/// # Panics
/// Never; an item longer than `u32::MAX` bytes cannot be configured (configurations are far
/// smaller), and is cut at `u32::MAX` bytes rather than misencoded.
pub fn encode_arguments<'a>(items: impl IntoIterator<Item = &'a [u8]>, out: &mut impl Extend<u8>) {
    for item in items {
        let len = u32::try_from(item.len()).unwrap_or(u32::MAX);
        out.extend(len.to_le_bytes());
        out.extend(item.iter().copied().take(len as usize));
    }
}

/// The items of an encoded argument list, in order. A truncated last item (a buffer cut
/// short) ends the list.
///
#[doc = arguments_doc!()]
pub fn decode_arguments(bytes: &[u8]) -> Arguments<'_> {
    Arguments { rest: bytes }
}

/// The iterator [`decode_arguments`] returns.
#[derive(Debug, Clone)]
pub struct Arguments<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Arguments<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let len = crate::read_u32(self.rest, 0)? as usize;
        let Some(item) = self.rest.get(4..4usize.saturating_add(len)) else {
            self.rest = &[];
            return None;
        };
        self.rest = &self.rest[4 + len..];
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_round_trips_with_any_bytes() {
        let items: [&[u8]; 5] = [b"put", b"/a b", b"", b"x\"y\\z\n", &[0x80, 0xff, b'/']];
        let mut encoded = [0u8; 64];
        let mut writer = Writer { bytes: &mut encoded, len: 0 };
        encode_arguments(items, &mut writer);
        let len = writer.len;
        assert_eq!(len, 5 * 4 + 3 + 4 + 6 + 3);
        assert_eq!(&encoded[..7], b"\x03\0\0\0put");
        assert!(decode_arguments(&encoded[..len]).eq(items));
        // A buffer cut inside the last item yields the whole items before it.
        assert!(decode_arguments(&encoded[..len - 1]).eq(items[..4].iter().copied()));
        assert_eq!(decode_arguments(&[]).count(), 0);
        assert_eq!(decode_arguments(&[1, 0]).count(), 0);
    }

    /// An `Extend` over a fixed array (this crate has no `alloc`).
    struct Writer<'a> {
        bytes: &'a mut [u8],
        len: usize,
    }

    impl Extend<u8> for Writer<'_> {
        fn extend<I: IntoIterator<Item = u8>>(&mut self, iter: I) {
            for byte in iter {
                self.bytes[self.len] = byte;
                self.len += 1;
            }
        }
    }
}
