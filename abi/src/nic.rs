//! The word before each frame in a network card's rings (`nic_attach`, `nic_transmit`), and the
//! Internet checksum (RFC 1071) a card fills in for a frame that asks for it.
//!
//! The word is a little-endian `u32`: the frame's length in its low 16 bits and, in a frame to
//! send, where the card is to fill in a TCP or UDP checksum — the offset in the frame of the part
//! it covers (the segment) in bits 16–23, and the offset of the checksum field in that part in
//! bits 24–31. A start of 0 asks for nothing: the frame's checksums are complete, and a received
//! frame's word is always so. A frame that asks leaves the sum of its pseudo-header, folded and
//! not complemented, in the checksum field, which the card's sum covers with the rest, as with
//! virtio-net's `VIRTIO_NET_HDR_F_NEEDS_CSUM`: a TAP card hands the frame to Linux so (which
//! neither sums a frame for local delivery nor checks it), the other cards fill the sum in.

/// The word before a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameWord {
    /// The frame's length.
    pub len: u16,
    /// Where the card is to fill in a checksum, if anywhere.
    pub checksum: Option<ChecksumAt>,
}

/// A checksum for the card to fill in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChecksumAt {
    /// Where in the frame the summed part starts (not 0).
    pub start: u8,
    /// Where the checksum field lies in the summed part.
    pub offset: u8,
}

impl FrameWord {
    /// Bytes of the word.
    pub const BYTES: u64 = 4;

    /// The word's value.
    pub fn encode(self) -> u32 {
        let checksum = self.checksum.map_or(0, |c| u32::from(c.start) << 16 | u32::from(c.offset) << 24);
        u32::from(self.len) | checksum
    }

    /// The word `value` stands for.
    pub fn decode(value: u32) -> FrameWord {
        let start = (value >> 16) as u8;
        let checksum = (start != 0).then_some(ChecksumAt { start, offset: (value >> 24) as u8 });
        FrameWord { len: value as u16, checksum }
    }
}

impl ChecksumAt {
    /// Whether the summed part and its field lie inside a frame of `len` bytes.
    pub fn fits(self, len: usize) -> bool {
        usize::from(self.start) + usize::from(self.offset) + 2 <= len
    }

    /// Fills the checksum into `frame`, unless it does not [`fit`](Self::fits) there.
    pub fn fill(self, frame: &mut [u8]) {
        if !self.fits(frame.len()) {
            return;
        }
        let (start, field) = (usize::from(self.start), usize::from(self.start) + usize::from(self.offset));
        // A sum of 0 is written as its other form, all ones, as Linux writes it: a UDP checksum of
        // 0 would say there is none.
        let sum = match !fold(sum(&frame[start..])) {
            0 => 0xffff,
            sum => sum,
        };
        frame[field..field + 2].copy_from_slice(&sum.to_ne_bytes());
    }
}

/// One's-complement addition of two partial sums.
fn add(a: u64, b: u64) -> u64 {
    let (sum, carry) = a.overflowing_add(b);
    sum + u64::from(carry)
}

/// The one's-complement sum of `bytes` taken as 16-bit words in the machine's byte order (an odd
/// last byte padded with a zero byte), not yet folded: eight bytes at a time with an end-around
/// carry, which is the same sum (RFC 1071 §2: it is independent of the word size and, taken in
/// the machine's byte order, of byte order too).
pub fn sum(bytes: &[u8]) -> u64 {
    let (words, rest) = bytes.as_chunks::<8>();
    // Four independent sums, so that the additions do not wait on one another's carries.
    let mut sums = [0u64; 4];
    let (quads, single) = words.as_chunks::<4>();
    for quad in quads {
        for (sum, word) in sums.iter_mut().zip(quad) {
            *sum = add(*sum, u64::from_ne_bytes(*word));
        }
    }
    let mut total = sums.into_iter().fold(0, add);
    for word in single {
        total = add(total, u64::from_ne_bytes(*word));
    }
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    add(total, u64::from_ne_bytes(tail))
}

/// Folds a one's-complement sum to 16 bits (in the machine's byte order, as [`sum`] took them).
pub fn fold(sum: u64) -> u16 {
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071's sum of 16-bit big-endian words, two bytes at a time.
    fn plain(bytes: &[u8]) -> u16 {
        let mut sum = 0u32;
        for pair in bytes.chunks(2) {
            sum += u32::from(u16::from_be_bytes([pair[0], pair.get(1).copied().unwrap_or(0)]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn the_sum_is_rfc_1071s_for_every_length_and_alignment() {
        let bytes: [u8; 300] = core::array::from_fn(|i| (i as u8).wrapping_mul(157).wrapping_add(3));
        for from in 0..9 {
            for to in from..bytes.len() {
                let part = &bytes[from..to];
                assert_eq!(u16::from_be(fold(sum(part))), plain(part), "bytes {from}..{to}");
            }
        }
        let ones = [0xffu8; 4096];
        assert_eq!(u16::from_be(fold(sum(&ones))), plain(&ones), "a carry out of every word");
    }

    #[test]
    fn a_filled_checksum_sums_to_all_ones() {
        let mut frame: [u8; 100] = core::array::from_fn(|i| i as u8);
        // The field holds the pseudo-header's sum, which a receiver adds to the segment's.
        let pseudo = u32::from(u16::from_be_bytes([frame[50], frame[51]]));
        let at = ChecksumAt { start: 34, offset: 16 };
        assert!(at.fits(frame.len()));
        at.fill(&mut frame);
        let total = u32::from(plain(&frame[34..])) + pseudo;
        assert_eq!((total & 0xffff) + (total >> 16), 0xffff, "the segment and pseudo-header sum to -0");
        let before = frame;
        for outside in [ChecksumAt { start: 90, offset: 16 }, ChecksumAt { start: 34, offset: 65 }] {
            assert!(!outside.fits(frame.len()), "{outside:?}");
            outside.fill(&mut frame);
        }
        assert!(ChecksumAt { start: 34, offset: 64 }.fits(frame.len()), "the field's last byte is the frame's");
        assert_eq!(frame, before, "nothing written outside");
    }

    #[test]
    fn words_round_trip() {
        for word in [
            FrameWord { len: 0, checksum: None },
            FrameWord { len: 65_532, checksum: None },
            FrameWord { len: 1514, checksum: Some(ChecksumAt { start: 34, offset: 16 }) },
            FrameWord { len: 70, checksum: Some(ChecksumAt { start: 255, offset: 255 }) },
        ] {
            assert_eq!(FrameWord::decode(word.encode()), word);
        }
        assert_eq!(FrameWord::decode(1514), FrameWord { len: 1514, checksum: None }, "a plain length");
        assert_eq!(FrameWord::decode(0xff00_05ea).checksum, None, "an offset without a start asks nothing");
    }
}
