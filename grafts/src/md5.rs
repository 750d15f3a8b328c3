//! The stream graft: the MD5 message digest of RFC 1321 over a stream of data.

use alloc::vec::Vec;

use crate::Xorshift;

/// Bytes fingerprinted per run, as in the paper.
pub const STREAM_BYTES: usize = 1 << 20;

/// The 1 MiB the paper fingerprints: pseudo-random bytes.
pub fn inputs() -> Vec<u8> {
    let mut random = Xorshift::new(0x5eed_0002);
    let mut bytes = Vec::with_capacity(STREAM_BYTES);
    while bytes.len() < STREAM_BYTES {
        bytes.extend_from_slice(&random.next_u64().to_le_bytes());
    }
    bytes
}

/// The test suite of RFC 1321, appendix A.5: messages and their digests.
pub const RFC_1321_SUITE: [(&str, &str); 7] = [
    ("", "d41d8cd98f00b204e9800998ecf8427e"),
    ("a", "0cc175b9c0f1b6a831c399e269772661"),
    ("abc", "900150983cd24fb0d6963f7d28e17f72"),
    ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
    ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
    ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
    (
        "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
        "57edf4a22be3c955ac49da2e2107b67a",
    ),
];

/// Per-round shift amounts (RFC 1321, section 3.4).
const SHIFTS: [u32; 16] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21];

/// `floor(abs(sin(i + 1)) * 2^32)`, the RFC's table T.
const T: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501, 0x698098d8,
    0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340,
    0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87,
    0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
    0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039,
    0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92,
    0xffeff47d, 0x85845dd1, 0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391,
];

/// An MD5 computation in progress.
#[derive(Debug, Clone)]
pub struct Md5 {
    state: [u32; 4],
    bytes: u64,
    pending: [u8; 64],
    pending_len: usize,
}

impl Default for Md5 {
    fn default() -> Self {
        Md5 { state: [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476], bytes: 0, pending: [0; 64], pending_len: 0 }
    }
}

impl Md5 {
    /// Feeds `data` into the digest.
    pub fn update(&mut self, mut data: &[u8]) {
        self.bytes = self.bytes.wrapping_add(data.len() as u64);
        if self.pending_len > 0 {
            let take = (64 - self.pending_len).min(data.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&data[..take]);
            self.pending_len += take;
            data = &data[take..];
            if self.pending_len < 64 {
                return;
            }
            let block = self.pending;
            self.transform(&block);
            self.pending_len = 0;
        }
        let mut blocks = data.chunks_exact(64);
        for block in &mut blocks {
            self.transform(block.try_into().unwrap_or(&[0; 64]));
        }
        let rest = blocks.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    /// Pads the message and returns its digest.
    pub fn finish(mut self) -> [u8; 16] {
        let bits = self.bytes.wrapping_mul(8);
        let padding = if self.pending_len < 56 { 56 - self.pending_len } else { 120 - self.pending_len };
        let mut tail = [0u8; 72];
        tail[0] = 0x80;
        tail[padding..padding + 8].copy_from_slice(&bits.to_le_bytes());
        self.update(&tail[..padding + 8]);
        let mut digest = [0u8; 16];
        for (out, word) in digest.chunks_exact_mut(4).zip(self.state) {
            out.copy_from_slice(&word.to_le_bytes());
        }
        digest
    }

    /// The four rounds over one 64-byte block, unrolled as in the RFC's reference code.
    fn transform(&mut self, block: &[u8; 64]) {
        let mut x = [0u32; 16];
        for (word, bytes) in x.iter_mut().zip(block.chunks_exact(4)) {
            *word = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        let [mut a, mut b, mut c, mut d] = self.state;
        macro_rules! step {
            ($f:expr, $a:ident, $b:ident, $c:ident, $d:ident, $k:expr, $s:expr, $i:expr) => {
                $a = $b.wrapping_add(
                    $a.wrapping_add($f($b, $c, $d)).wrapping_add(x[$k]).wrapping_add(T[$i]).rotate_left($s),
                );
            };
        }
        let f = |b: u32, c: u32, d: u32| (b & c) | (!b & d);
        let g = |b: u32, c: u32, d: u32| (b & d) | (c & !d);
        let h = |b: u32, c: u32, d: u32| b ^ c ^ d;
        let i = |b: u32, c: u32, d: u32| c ^ (b | !d);
        macro_rules! round {
            ($f:expr, $first:expr, $stride:expr, $round:expr) => {
                for q in 0..4 {
                    let n = $round * 16 + q * 4;
                    let k = |j: usize| ($first + $stride * (q * 4 + j)) % 16;
                    step!($f, a, b, c, d, k(0), SHIFTS[$round * 4], n);
                    step!($f, d, a, b, c, k(1), SHIFTS[$round * 4 + 1], n + 1);
                    step!($f, c, d, a, b, k(2), SHIFTS[$round * 4 + 2], n + 2);
                    step!($f, b, c, d, a, k(3), SHIFTS[$round * 4 + 3], n + 3);
                }
            };
        }
        round!(f, 0, 1, 0);
        round!(g, 1, 5, 1);
        round!(h, 5, 3, 2);
        round!(i, 0, 7, 3);
        for (s, v) in self.state.iter_mut().zip([a, b, c, d]) {
            *s = s.wrapping_add(v);
        }
    }
}

/// The digest of `data`.
pub fn digest(data: &[u8]) -> [u8; 16] {
    let mut md5 = Md5::default();
    md5.update(data);
    md5.finish()
}

/// The digest as lowercase hexadecimal, as `md5sum` prints it.
pub fn hex(digest: &[u8; 16]) -> alloc::string::String {
    use core::fmt::Write;
    digest.iter().fold(alloc::string::String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_1321_test_suite() {
        for (message, expected) in RFC_1321_SUITE {
            assert_eq!(hex(&digest(message.as_bytes())), expected, "MD5 (\"{message}\")");
        }
    }

    #[test]
    fn pieces_of_any_size_give_the_same_digest() {
        let data = inputs();
        let whole = digest(&data);
        for piece in [1, 3, 63, 64, 65, 4096, 65536] {
            let mut md5 = Md5::default();
            data.chunks(piece).for_each(|chunk| md5.update(chunk));
            assert_eq!(md5.finish(), whole, "pieces of {piece} bytes");
        }
    }
}
