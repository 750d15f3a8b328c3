//! The MOUNT protocol, version 3 (RFC 1813 Appendix I): program 100005. A client MNTs an
//! exported path and gets the file handle of its root, which NFSv3 calls then use.

use alloc::vec::Vec;

use crate::nfs3::FileHandle;
use crate::xdr::{Decoder, Encoder, Xdr, XdrError, decode_list, encode_list, xdr_enum};

/// MOUNT's program number.
pub const PROGRAM: u32 = 100_005;
/// The version described here.
pub const VERSION: u32 = 3;
/// The longest path (`MNTPATHLEN`).
pub const MAX_PATH: usize = 1024;
/// The longest host or group name (`MNTNAMLEN`).
pub const MAX_NAME: usize = 255;

/// The procedures of version 3.
pub mod procedure {
    /// Does nothing.
    pub const NULL: u32 = 0;
    /// Mounts: [`super::DirPath`] → [`super::MountResult`].
    pub const MNT: u32 = 1;
    /// The mounts the server remembers: void → [`super::MountList`].
    pub const DUMP: u32 = 2;
    /// Forgets a mount: [`super::DirPath`] → void.
    pub const UMNT: u32 = 3;
    /// Forgets every mount of the caller: void → void.
    pub const UMNTALL: u32 = 4;
    /// The exports: void → [`super::Exports`].
    pub const EXPORT: u32 = 5;
}

xdr_enum! {
    /// `mountstat3`.
    pub enum MountStatus {
        /// Success.
        Ok = 0,
        /// Not owner.
        Perm = 1,
        /// No such file or directory.
        NoEnt = 2,
        /// I/O error.
        Io = 5,
        /// Permission denied.
        Access = 13,
        /// Not a directory.
        NotDir = 20,
        /// Invalid argument.
        Inval = 22,
        /// File name too long.
        NameTooLong = 63,
        /// Operation not supported.
        NotSupp = 10004,
        /// A failure on the server.
        ServerFault = 10006,
    }
}

/// A path (`dirpath`, at most 1024 bytes), MNT's and UMNT's argument.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirPath(pub Vec<u8>);

impl Xdr for DirPath {
    fn encode(&self, e: &mut Encoder) {
        e.opaque(&self.0);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.opaque_vec(MAX_PATH).map(DirPath)
    }
}

/// MNT's result (`mountres3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountResult {
    /// Mounted: the root's handle and the authentication flavours the server takes.
    Ok {
        /// The file handle of the exported directory.
        handle: FileHandle,
        /// The flavours, most preferred first.
        flavors: Vec<u32>,
    },
    /// Refused.
    Err(MountStatus),
}

impl Xdr for MountResult {
    fn encode(&self, e: &mut Encoder) {
        match self {
            MountResult::Ok { handle, flavors } => {
                e.u32(MountStatus::Ok as u32);
                handle.encode(e);
                e.u32_array(flavors);
            }
            MountResult::Err(status) => status.encode(e),
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        match MountStatus::decode(d)? {
            MountStatus::Ok => Ok(MountResult::Ok { handle: FileHandle::decode(d)?, flavors: d.u32_array(64)? }),
            status => Ok(MountResult::Err(status)),
        }
    }
}

/// One mount the server remembers (`mountbody`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The client's host name.
    pub hostname: Vec<u8>,
    /// The path it mounted.
    pub directory: Vec<u8>,
}

impl Xdr for MountEntry {
    fn encode(&self, e: &mut Encoder) {
        e.opaque(&self.hostname);
        e.opaque(&self.directory);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        Ok(MountEntry { hostname: d.opaque_vec(MAX_NAME)?, directory: d.opaque_vec(MAX_PATH)? })
    }
}

/// DUMP's result (`mountlist`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MountList(pub Vec<MountEntry>);

impl Xdr for MountList {
    fn encode(&self, e: &mut Encoder) {
        encode_list(e, &self.0);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        decode_list(d).map(MountList)
    }
}

/// A group name in an export's list (`groupnode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group(pub Vec<u8>);

impl Xdr for Group {
    fn encode(&self, e: &mut Encoder) {
        e.opaque(&self.0);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.opaque_vec(MAX_NAME).map(Group)
    }
}

/// One export (`exportnode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The exported path.
    pub directory: Vec<u8>,
    /// The groups (host names) allowed to mount it; empty: everyone.
    pub groups: Vec<Group>,
}

impl Xdr for Export {
    fn encode(&self, e: &mut Encoder) {
        e.opaque(&self.directory);
        encode_list(e, &self.groups);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        Ok(Export { directory: d.opaque_vec(MAX_PATH)?, groups: decode_list(d)? })
    }
}

/// EXPORT's result (`exports`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Exports(pub Vec<Export>);

impl Xdr for Exports {
    fn encode(&self, e: &mut Encoder) {
        encode_list(e, &self.0);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        decode_list(d).map(Exports)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn mount_result_layout() {
        let handle = FileHandle::new(&[0xaa; 12]).unwrap();
        let ok = MountResult::Ok { handle, flavors: vec![1, 0] };
        let mut expected = vec![0, 0, 0, 0, 0, 0, 0, 12];
        expected.extend_from_slice(&[0xaa; 12]);
        expected.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(ok.to_xdr(), expected);
        assert_eq!(MountResult::from_xdr(&expected), Ok(ok));
        assert_eq!(MountResult::Err(MountStatus::NoEnt).to_xdr(), [0, 0, 0, 2]);
        assert_eq!(MountResult::from_xdr(&[0, 0, 0, 3]), Err(XdrError::BadValue));
    }

    #[test]
    fn exports_round_trip() {
        let exports = Exports(vec![Export { directory: b"/".to_vec(), groups: vec![Group(b"*".to_vec())] }]);
        let bytes = exports.to_xdr();
        // TRUE, "/", TRUE, "*", FALSE (groups), FALSE (exports).
        assert_eq!(
            bytes,
            [0, 0, 0, 1, 0, 0, 0, 1, b'/', 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, b'*', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(Exports::from_xdr(&bytes), Ok(exports));
        assert_eq!(DirPath::from_xdr(&[0, 0, 4, 1]), Err(XdrError::TooLong));
    }
}
