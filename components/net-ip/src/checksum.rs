//! The Internet checksum (RFC 1071) of the TCP segments the stack sends, filled in by the
//! device layer after smoltcp wrote the frame (smoltcp is told not to: `Checksum::Rx`).
//!
//! smoltcp sums two bytes at a time; a 32 KiB READ reply's segment then spent more time in its
//! checksum than in the copy of its payload. This sum takes eight bytes at a time with an
//! end-around carry, which is the same one's-complement sum (RFC 1071 §2: the sum is
//! independent of the word size and, taken in the machine's byte order, of byte order too).

/// EtherType of IPv4.
const IPV4: [u8; 2] = [0x08, 0x00];
/// Bytes of an Ethernet header.
const ETHERNET: usize = 14;
/// IP protocol number of TCP.
const TCP: u8 = 6;
/// Offset of the checksum in a TCP header.
const TCP_CHECKSUM: usize = 16;

/// Fills in the TCP checksum of `frame` when it is an IPv4 TCP segment that is not a fragment
/// (smoltcp fragments no TCP segment); any other frame is left as it is.
pub fn fill_tcp(frame: &mut [u8]) {
    let Some(ip) = frame.get(ETHERNET..) else { return };
    if frame[12..14] != IPV4 || ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != TCP {
        return;
    }
    let header = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    if fragment != 0 || header < 20 || total > ip.len() || total < header + TCP_CHECKSUM + 2 {
        return;
    }
    let mut pseudo = [0u8; 12];
    pseudo[..8].copy_from_slice(&ip[12..20]);
    pseudo[9] = TCP;
    pseudo[10..].copy_from_slice(&((total - header) as u16).to_be_bytes());
    let segment = &mut frame[ETHERNET + header..ETHERNET + total];
    segment[TCP_CHECKSUM..TCP_CHECKSUM + 2].fill(0);
    let sum = fold(add(sum(&pseudo), sum(segment)));
    segment[TCP_CHECKSUM..TCP_CHECKSUM + 2].copy_from_slice(&(!sum).to_ne_bytes());
}

/// One's-complement addition of two partial sums.
fn add(a: u64, b: u64) -> u64 {
    let (sum, carry) = a.overflowing_add(b);
    sum + u64::from(carry)
}

/// The one's-complement sum of `bytes` taken as words in the machine's byte order (an odd last
/// byte padded with a zero byte), not yet folded to 16 bits.
fn sum(bytes: &[u8]) -> u64 {
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

/// Folds a one's-complement sum to 16 bits.
fn fold(sum: u64) -> u16 {
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use smoltcp::wire::{IpAddress, Ipv4Packet, TcpPacket};

    /// A frame as smoltcp emits it: Ethernet, a 20-byte IPv4 header, a TCP header of
    /// `options` extra bytes and `payload` bytes of a pattern.
    fn frame(options: usize, payload: usize, seed: u8) -> Vec<u8> {
        let tcp = 20 + options;
        let total = 20 + tcp + payload;
        let mut frame = vec![0u8; ETHERNET + total];
        frame[12..14].copy_from_slice(&IPV4);
        let ip = &mut frame[ETHERNET..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[6] = 0x40; // don't fragment
        ip[8] = 64;
        ip[9] = TCP;
        ip[12..16].copy_from_slice(&[10, 99, 1, 2]);
        ip[16..20].copy_from_slice(&[10, 99, 1, seed]);
        // Ports, sequence and acknowledgement numbers, options and payload: a pattern.
        for (i, byte) in ip[20..].iter_mut().enumerate().filter(|(i, _)| *i < 12 || *i >= 20) {
            *byte = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
        ip[20 + 12] = ((tcp / 4) as u8) << 4;
        ip[20 + 14] = 0xff; // window
        frame
    }

    fn verifies(frame: &[u8]) -> bool {
        let ip = Ipv4Packet::new_checked(&frame[ETHERNET..]).unwrap();
        let (src, dst) = (IpAddress::Ipv4(ip.src_addr()), IpAddress::Ipv4(ip.dst_addr()));
        TcpPacket::new_checked(ip.payload()).unwrap().verify_checksum(&src, &dst)
    }

    #[test]
    fn the_sum_is_smoltcps_for_every_length_and_alignment() {
        for payload in (0..80).chain([1023, 1460, 32 * 1024 + 7, 65_000]) {
            for options in [0, 12] {
                let mut frame = frame(options, payload, payload as u8);
                fill_tcp(&mut frame);
                assert!(verifies(&frame), "payload {payload}, options {options}");
            }
        }
    }

    #[test]
    fn a_carry_out_of_every_word_is_folded_back() {
        let mut frame = frame(0, 4096, 0);
        frame[ETHERNET + 40..].fill(0xff);
        fill_tcp(&mut frame);
        assert!(verifies(&frame));
    }

    #[test]
    fn frames_that_are_not_unfragmented_tcp_over_ipv4_are_left_alone() {
        let untouched = |change: &dyn Fn(&mut Vec<u8>)| {
            let mut frame = frame(0, 100, 7);
            change(&mut frame);
            let before = frame.clone();
            fill_tcp(&mut frame);
            frame == before
        };
        assert!(untouched(&|f| f[13] = 0x06)); // ARP
        assert!(untouched(&|f| f[ETHERNET + 9] = 17)); // UDP
        assert!(untouched(&|f| f[ETHERNET + 6] |= 0x20)); // more fragments
        assert!(untouched(&|f| f[ETHERNET + 7] = 1)); // a later fragment
        assert!(untouched(&|f| f[ETHERNET + 2] = 0xff)); // longer than the frame
        assert!(untouched(&|f| f.truncate(ETHERNET + 10))); // cut short
        assert!(!untouched(&|_| ()));
    }
}
