//! FUSE requests, as `/dev/fuse` could deliver them, to `drv-fuse`'s parser
//! (`components/drv-fuse/src/protocol.rs`, compiled here for the host: plain Rust without host
//! calls). Beyond "no panic": an accepted request's header length is the bytes', every name it
//! carries lies inside them without a NUL, a write's data is all the bytes after its header, and
//! a reply encoded for it carries its own length.
#![no_main]

extern crate alloc;

// The parser is what is fuzzed; most of the protocol's constants and replies are not.
#[allow(dead_code)]
#[path = "../../components/drv-fuse/src/protocol.rs"]
mod protocol;

use libfuzzer_sys::fuzz_target;
use protocol::{Attr, ParseError, Reply, Request};

fn name_ok(bytes: &[u8], name: &[u8]) {
    assert!(!name.contains(&0), "a name without its NUL");
    let start = name.as_ptr() as usize - bytes.as_ptr() as usize;
    assert!(start + name.len() < bytes.len(), "a name inside the request, its NUL too");
}

fuzz_target!(|bytes: &[u8]| {
    match protocol::parse(bytes) {
        Ok((header, request)) => {
            assert_eq!(header.len as usize, bytes.len());
            match request {
                Request::Lookup(n) | Request::Unlink(n) | Request::RemoveDirectory(n) => name_ok(bytes, n),
                Request::MakeNode { name, .. }
                | Request::MakeDirectory { name, .. }
                | Request::Create { name, .. }
                | Request::Link { name, .. } => name_ok(bytes, name),
                Request::Symlink { name, target } => {
                    name_ok(bytes, name);
                    name_ok(bytes, target);
                }
                Request::Rename { old, new, .. } => {
                    name_ok(bytes, old);
                    name_ok(bytes, new);
                }
                Request::Write { data, .. } => {
                    assert_eq!(data.len(), bytes.len() - protocol::IN_HEADER - 40, "a write's data is the rest");
                }
                _ => {}
            }
            let mut reply = Reply::ok(header.unique, Vec::new());
            reply.entry(header.nodeid, 1, 1, &Attr::default());
            let limit = bytes.len() % 4096;
            protocol::push_dirent(&mut reply, limit, None, 2, 3, 4, &bytes[protocol::IN_HEADER..]);
            let encoded = reply.finish();
            assert_eq!(u32::from_le_bytes(encoded[..4].try_into().unwrap()) as usize, encoded.len());
        }
        Err(ParseError::Arguments(unique)) => {
            assert_eq!(Reply::error(unique, protocol::errno::EINVAL, Vec::new()).len(), protocol::OUT_HEADER);
        }
        Err(ParseError::Header) => {}
    }
});
