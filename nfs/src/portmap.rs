//! The portmapper, rpcbind version 2 (RFC 1833 §3): program 100000, version 2, on port 111.
//! A server SETs the port of each (program, version, protocol) it serves; a client asks GETPORT.

use alloc::vec::Vec;

use crate::xdr::{Decoder, Encoder, Xdr, XdrError, decode_list, encode_list, xdr_struct};

/// The portmapper's program number.
pub const PROGRAM: u32 = 100_000;
/// The version described here.
pub const VERSION: u32 = 2;
/// The portmapper's well-known port, UDP and TCP.
pub const PORT: u16 = 111;
/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u32 = 6;
/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u32 = 17;

/// The procedures of version 2.
pub mod procedure {
    /// Does nothing.
    pub const NULL: u32 = 0;
    /// Registers a mapping: `Mapping` → `bool` (false if the triple is mapped already).
    pub const SET: u32 = 1;
    /// Removes the mappings of (program, version) for every protocol: `Mapping` → `bool`.
    pub const UNSET: u32 = 2;
    /// The port of (program, version, protocol): `Mapping` → `u32`, 0 if unregistered.
    pub const GETPORT: u32 = 3;
    /// Every mapping: void → [`super::MappingList`].
    pub const DUMP: u32 = 4;
    /// Calls a procedure on the caller's behalf (not served by Domos' portmapper).
    pub const CALLIT: u32 = 5;
}

xdr_struct! {
    /// A mapping of (program, version, protocol) to a port (`struct mapping`).
    #[derive(Copy, Hash)]
    pub struct Mapping {
        /// The program.
        pub program: u32,
        /// Its version.
        pub version: u32,
        /// [`IPPROTO_TCP`] or [`IPPROTO_UDP`].
        pub protocol: u32,
        /// The port (ignored by UNSET and GETPORT's argument).
        pub port: u32,
    }
}

/// DUMP's result: a linked list of mappings (`pmaplist`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MappingList(pub Vec<Mapping>);

impl Xdr for MappingList {
    fn encode(&self, e: &mut Encoder) {
        encode_list(e, &self.0);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        decode_list(d).map(MappingList)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn mapping_layout() {
        let m = Mapping { program: 100_003, version: 3, protocol: IPPROTO_TCP, port: 2049 };
        let words: Vec<u8> = [100_003u32, 3, 6, 2049].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(m.to_xdr(), words);
        assert_eq!(Mapping::from_xdr(&words), Ok(m));
        let list = MappingList(vec![m]);
        let bytes = list.to_xdr();
        assert_eq!(bytes.len(), 4 + 16 + 4);
        assert_eq!(MappingList::from_xdr(&bytes), Ok(list));
    }
}
