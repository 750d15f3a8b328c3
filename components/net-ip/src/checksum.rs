//! The checksums of the TCP segments the stack sends: the card fills them in (`domos_abi::nic`),
//! and the stack leaves it the pseudo-header's sum (smoltcp is told not to sum: `Checksum::Rx`).
//! A TAP card hands such a segment to Linux, which sums nothing for local delivery; smoltcp
//! summed two bytes at a time, and a 32 KiB READ reply's segment spent more time in its
//! checksum than in the copy of its payload.

use domos_abi::nic::{ChecksumAt, fold, sum};

/// EtherType of IPv4.
const IPV4: [u8; 2] = [0x08, 0x00];
/// Bytes of an Ethernet header.
const ETHERNET: usize = 14;
/// IP protocol number of TCP.
const TCP: u8 = 6;
/// Offset of the checksum in a TCP header.
const TCP_CHECKSUM: u8 = 16;

/// For an IPv4 TCP segment that is not a fragment (smoltcp fragments no TCP segment): puts its
/// pseudo-header's sum into its checksum field and says where the card is to fill the checksum
/// in (or fills it in itself when the frame goes on past the segment). Any other frame is left
/// as it is.
pub fn offload_tcp(frame: &mut [u8]) -> Option<ChecksumAt> {
    let ip = frame.get(ETHERNET..)?;
    if frame[12..14] != IPV4 || ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != TCP {
        return None;
    }
    let header = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    let field = ETHERNET + header + usize::from(TCP_CHECKSUM);
    if fragment != 0 || header < 20 || total > ip.len() || total < header + usize::from(TCP_CHECKSUM) + 2 {
        return None;
    }
    let mut pseudo = [0u8; 12];
    pseudo[..8].copy_from_slice(&ip[12..20]);
    pseudo[9] = TCP;
    pseudo[10..].copy_from_slice(&((total - header) as u16).to_be_bytes());
    frame[field..field + 2].copy_from_slice(&fold(sum(&pseudo)).to_ne_bytes());
    let at = ChecksumAt { start: (ETHERNET + header) as u8, offset: TCP_CHECKSUM };
    let end = ETHERNET + total;
    if end == frame.len() {
        return Some(at);
    }
    // Bytes after the segment (none in a frame smoltcp makes): a card would sum them too, so
    // the stack sums the segment itself.
    at.fill(&mut frame[..end]);
    None
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

    /// Offloads `frame`'s checksum and fills it in as a card does.
    fn send(frame: &mut [u8]) {
        let at = offload_tcp(frame).expect("a TCP segment's checksum is offloaded");
        at.fill(frame);
    }

    #[test]
    fn the_card_makes_the_checksum_smoltcp_checks_for_every_length_and_alignment() {
        for payload in (0..80).chain([1023, 1460, 32 * 1024 + 7, 65_000]) {
            for options in [0, 12] {
                let mut frame = frame(options, payload, payload as u8);
                send(&mut frame);
                assert!(verifies(&frame), "payload {payload}, options {options}");
            }
        }
    }

    #[test]
    fn a_carry_out_of_every_word_is_folded_back() {
        let mut frame = frame(0, 4096, 0);
        frame[ETHERNET + 40..].fill(0xff);
        send(&mut frame);
        assert!(verifies(&frame));
    }

    #[test]
    fn a_frame_that_goes_on_past_its_segment_is_summed_by_the_stack() {
        let mut frame = frame(0, 100, 9);
        frame.extend_from_slice(&[0xab; 7]);
        assert_eq!(offload_tcp(&mut frame), None, "a card would sum the bytes past the segment");
        assert!(verifies(&frame));
    }

    #[test]
    fn frames_that_are_not_unfragmented_tcp_over_ipv4_are_left_alone() {
        let untouched = |change: &dyn Fn(&mut Vec<u8>)| {
            let mut frame = frame(0, 100, 7);
            change(&mut frame);
            let before = frame.clone();
            offload_tcp(&mut frame).is_none() && frame == before
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
