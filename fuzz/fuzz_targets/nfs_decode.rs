//! The decoders of `domos-nfs` — ONC RPC headers, every NFSv3, MOUNT v3 and rpcbind v2 argument
//! and result, AUTH_SYS credentials and TCP record marking — which `svc-nfs` and `svc-rpcbind`
//! run on every datagram and record a client sends.
//!
//! Input: `[selector: u8, bytes…]`: the selector picks what to decode the bytes as (a message
//! header followed by the arguments of the procedure it names, or one type directly), and the
//! way the bytes are cut into pushes for the record reader.
//!
//! Checks, beyond no panic and no allocation beyond the input's size: every value decoded
//! encodes to bytes that decode to the same value (the codec is its own inverse on what it
//! accepts); WRITE's arguments decode alike with their data borrowed, as `svc-nfs` decodes them; a decoder never reads past the input; the record reader returns records no longer
//! than its maximum, whose total is at most what was pushed.
#![no_main]

use domos_nfs::mount::{DirPath, Exports, MountList, MountResult};
use domos_nfs::nfs3::*;
use domos_nfs::portmap::{Mapping, MappingList};
use domos_nfs::rpc::record::RecordReader;
use domos_nfs::rpc::{AuthSys, Message};
use domos_nfs::xdr::{Decoder, Xdr};
use libfuzzer_sys::fuzz_target;

/// Decodes `T` from the front of `d`; if it decodes, checks the round trip.
fn round_trip<T: Xdr + PartialEq + std::fmt::Debug>(d: &mut Decoder<'_>) {
    let before = d.remaining();
    if let Ok(value) = T::decode(d) {
        assert!(d.remaining() <= before);
        let bytes = value.to_xdr();
        let again = T::from_xdr(&bytes).expect("what was encoded decodes");
        assert_eq!(again, value, "decode(encode(x)) == x");
    }
}

/// WRITE's arguments: as the server decodes them (the data borrowed from the request), the same
/// as decoded whole; then the round trip.
fn write_args(d: &mut Decoder<'_>) {
    let bytes = d.rest();
    match (WriteHead::decode_with_data(&mut Decoder::new(bytes)), WriteArgs::decode(&mut Decoder::new(bytes))) {
        (Ok((head, data)), Ok(whole)) => assert!(head == whole.head && data == whole.data.as_slice()),
        (Err(borrowed), Err(whole)) => assert_eq!(borrowed, whole),
        (borrowed, whole) => panic!("the server's WRITE decoding differs: {borrowed:?} against {whole:?}"),
    }
    round_trip::<WriteArgs>(d);
}

/// Decodes the arguments (`results` false) or results of NFSv3 procedure `procedure`.
fn nfs(procedure: u32, results: bool, d: &mut Decoder<'_>) {
    match (procedure % 22, results) {
        (1, false) => round_trip::<GetattrArgs>(d),
        (1, true) => round_trip::<GetattrRes>(d),
        (2, false) => round_trip::<SetattrArgs>(d),
        (2, true) => round_trip::<SetattrRes>(d),
        (3, false) => round_trip::<LookupArgs>(d),
        (3, true) => round_trip::<LookupRes>(d),
        (4, false) => round_trip::<AccessArgs>(d),
        (4, true) => round_trip::<AccessRes>(d),
        (5, false) => round_trip::<ReadlinkArgs>(d),
        (5, true) => round_trip::<ReadlinkRes>(d),
        (6, false) => round_trip::<ReadArgs>(d),
        (6, true) => round_trip::<ReadRes>(d),
        (7, false) => write_args(d),
        (7, true) => round_trip::<WriteRes>(d),
        (8, false) => round_trip::<CreateArgs>(d),
        (9, false) => round_trip::<MkdirArgs>(d),
        (10, false) => round_trip::<SymlinkArgs>(d),
        (11, false) => round_trip::<MknodArgs>(d),
        (8..=11, true) => round_trip::<CreateRes>(d),
        (12 | 13, false) => round_trip::<DirOpArgs>(d),
        (12 | 13, true) => round_trip::<RemoveRes>(d),
        (14, false) => round_trip::<RenameArgs>(d),
        (14, true) => round_trip::<RenameRes>(d),
        (15, false) => round_trip::<LinkArgs>(d),
        (15, true) => round_trip::<LinkRes>(d),
        (16, false) => round_trip::<ReaddirArgs>(d),
        (16, true) => round_trip::<ReaddirRes>(d),
        (17, false) => round_trip::<ReaddirplusArgs>(d),
        (17, true) => round_trip::<ReaddirplusRes>(d),
        (18, false) => round_trip::<FsstatArgs>(d),
        (18, true) => round_trip::<FsstatRes>(d),
        (19, false) => round_trip::<FsinfoArgs>(d),
        (19, true) => round_trip::<FsinfoRes>(d),
        (20, false) => round_trip::<PathconfArgs>(d),
        (20, true) => round_trip::<PathconfRes>(d),
        (21, false) => round_trip::<CommitArgs>(d),
        (21, true) => round_trip::<CommitRes>(d),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else { return };
    let mut d = Decoder::new(bytes);
    match selector % 8 {
        // A whole call or reply, as the server sees it: the header picks the arguments.
        0 => {
            if let Ok(message) = Message::decode(&mut d) {
                match message {
                    Message::Call(call) => {
                        let _ = call.credential.caller();
                        nfs(call.procedure, false, &mut d);
                    }
                    Message::Reply(_) => nfs(u32::from(selector >> 3), true, &mut d),
                }
            }
        }
        1 => nfs(u32::from(selector >> 3), false, &mut d),
        2 => nfs(u32::from(selector >> 3), true, &mut d),
        3 => match selector >> 3 & 7 {
            0 => round_trip::<DirPath>(&mut d),
            1 => round_trip::<MountResult>(&mut d),
            2 => round_trip::<MountList>(&mut d),
            3 => round_trip::<Exports>(&mut d),
            4 => round_trip::<Mapping>(&mut d),
            5 => round_trip::<MappingList>(&mut d),
            6 => round_trip::<AuthSys>(&mut d),
            _ => round_trip::<Fattr3>(&mut d),
        },
        _ => {
            // The record reader, fed in pieces whose sizes come from the selector, pushed or
            // read into its buffer by turns.
            let max = 1 << (8 + (selector >> 4));
            let step = usize::from(selector & 7) + 1;
            let mut reader = RecordReader::new(max);
            let mut out = 0;
            for (i, piece) in bytes.chunks(step).enumerate() {
                if i % 2 == 0 {
                    reader.push(piece);
                } else {
                    let _ = reader.fill(|room| -> Result<usize, ()> {
                        room[..piece.len()].copy_from_slice(piece);
                        Ok(piece.len())
                    });
                }
                loop {
                    match reader.next_record() {
                        Ok(Some(record)) => {
                            assert!(record.len() <= max);
                            out += record.len();
                        }
                        Ok(None) => break,
                        Err(_) => return,
                    }
                }
            }
            assert!(out <= bytes.len());
        }
    }
});
