//! NFS version 3 (RFC 1813): program 100003, version 3 — the procedures' arguments and
//! results, named after the RFC's types (`fattr3` is [`Fattr3`], `LOOKUP3args` is
//! [`LookupArgs`]).
//!
//! A result whose RFC union switches on `nfsstat3` is a [`Res`]: [`Res::Ok`] with the success
//! arm, or [`Res::Err`] with the status and the failure arm (often the attributes or wcc data the
//! RFC sends with an error).

use alloc::vec::Vec;

use crate::xdr::{Decoder, Encoder, Xdr, XdrError, xdr_enum, xdr_struct};

/// NFS' program number.
pub const PROGRAM: u32 = 100_003;
/// The version described here.
pub const VERSION: u32 = 3;
/// NFS' well-known port, UDP and TCP.
pub const PORT: u16 = 2049;
/// The longest file handle (`NFS3_FHSIZE`).
pub const FHSIZE: usize = 64;
/// The size of a cookie verifier, a create verifier and a write verifier.
pub const VERIFIER_SIZE: usize = 8;
/// The longest name or path this crate decodes (longer ones are garbage, not a name).
pub const MAX_PATH: usize = 4096;

/// The procedures, numbered as RFC 1813 §3.
pub mod procedure {
    /// Does nothing.
    pub const NULL: u32 = 0;
    /// [`super::GetattrArgs`] → [`super::GetattrRes`].
    pub const GETATTR: u32 = 1;
    /// [`super::SetattrArgs`] → [`super::SetattrRes`].
    pub const SETATTR: u32 = 2;
    /// [`super::LookupArgs`] → [`super::LookupRes`].
    pub const LOOKUP: u32 = 3;
    /// [`super::AccessArgs`] → [`super::AccessRes`].
    pub const ACCESS: u32 = 4;
    /// [`super::ReadlinkArgs`] → [`super::ReadlinkRes`].
    pub const READLINK: u32 = 5;
    /// [`super::ReadArgs`] → [`super::ReadRes`].
    pub const READ: u32 = 6;
    /// [`super::WriteArgs`] → [`super::WriteRes`].
    pub const WRITE: u32 = 7;
    /// [`super::CreateArgs`] → [`super::CreateRes`].
    pub const CREATE: u32 = 8;
    /// [`super::MkdirArgs`] → [`super::CreateRes`].
    pub const MKDIR: u32 = 9;
    /// [`super::SymlinkArgs`] → [`super::CreateRes`].
    pub const SYMLINK: u32 = 10;
    /// [`super::MknodArgs`] → [`super::CreateRes`].
    pub const MKNOD: u32 = 11;
    /// [`super::DirOpArgs`] → [`super::RemoveRes`].
    pub const REMOVE: u32 = 12;
    /// [`super::DirOpArgs`] → [`super::RemoveRes`].
    pub const RMDIR: u32 = 13;
    /// [`super::RenameArgs`] → [`super::RenameRes`].
    pub const RENAME: u32 = 14;
    /// [`super::LinkArgs`] → [`super::LinkRes`].
    pub const LINK: u32 = 15;
    /// [`super::ReaddirArgs`] → [`super::ReaddirRes`].
    pub const READDIR: u32 = 16;
    /// [`super::ReaddirplusArgs`] → [`super::ReaddirplusRes`].
    pub const READDIRPLUS: u32 = 17;
    /// [`super::FsstatArgs`] → [`super::FsstatRes`].
    pub const FSSTAT: u32 = 18;
    /// [`super::FsinfoArgs`] → [`super::FsinfoRes`].
    pub const FSINFO: u32 = 19;
    /// [`super::PathconfArgs`] → [`super::PathconfRes`].
    pub const PATHCONF: u32 = 20;
    /// [`super::CommitArgs`] → [`super::CommitRes`].
    pub const COMMIT: u32 = 21;
    /// The highest procedure number.
    pub const LAST: u32 = COMMIT;
}

xdr_enum! {
    /// `nfsstat3`.
    pub enum Status {
        /// Success.
        Ok = 0,
        /// Not owner.
        Perm = 1,
        /// No such file or directory.
        NoEnt = 2,
        /// I/O error.
        Io = 5,
        /// No such device or address.
        NxIo = 6,
        /// Permission denied.
        Access = 13,
        /// File exists.
        Exist = 17,
        /// Cross-device link.
        XDev = 18,
        /// No such device.
        NoDev = 19,
        /// Not a directory.
        NotDir = 20,
        /// Is a directory.
        IsDir = 21,
        /// Invalid argument.
        Inval = 22,
        /// File too large.
        FBig = 27,
        /// No space left.
        NoSpc = 28,
        /// Read-only file system.
        RoFs = 30,
        /// Too many hard links.
        MLink = 31,
        /// Name too long.
        NameTooLong = 63,
        /// Directory not empty.
        NotEmpty = 66,
        /// Quota exceeded.
        DQuot = 69,
        /// The file handle names a file that is gone.
        Stale = 70,
        /// Too many levels of remote in path.
        Remote = 71,
        /// The file handle is not one of this server's.
        BadHandle = 10001,
        /// SETATTR's guard did not match.
        NotSync = 10002,
        /// A READDIR cookie is stale.
        BadCookie = 10003,
        /// Operation not supported.
        NotSupp = 10004,
        /// The buffer or request is too small.
        TooSmall = 10005,
        /// A failure on the server.
        ServerFault = 10006,
        /// An object type the server does not create.
        BadType = 10007,
        /// Try again later.
        Jukebox = 10008,
    }
}

xdr_enum! {
    /// `ftype3`.
    pub enum FileType {
        /// Regular file.
        Regular = 1,
        /// Directory.
        Directory = 2,
        /// Block device.
        Block = 3,
        /// Character device.
        Character = 4,
        /// Symbolic link.
        Symlink = 5,
        /// Socket.
        Socket = 6,
        /// Named pipe.
        Fifo = 7,
    }
}

xdr_enum! {
    /// `stable_how`: how far WRITE must have carried the data before it replies.
    pub enum StableHow {
        /// Anywhere; COMMIT makes it stable.
        Unstable = 0,
        /// The data on stable storage.
        DataSync = 1,
        /// The data and the metadata on stable storage.
        FileSync = 2,
    }
}

xdr_enum! {
    /// `createmode3`.
    pub enum CreateMode {
        /// Create, or truncate what is there.
        Unchecked = 0,
        /// Create; `Exist` if the name is taken.
        Guarded = 1,
        /// Create once, identified by a verifier, so a retransmission succeeds.
        Exclusive = 2,
    }
}

/// The bits of ACCESS (`ACCESS3_*`).
pub mod access {
    /// Read data or list a directory.
    pub const READ: u32 = 0x01;
    /// Look up a name in a directory.
    pub const LOOKUP: u32 = 0x02;
    /// Rewrite data or change attributes.
    pub const MODIFY: u32 = 0x04;
    /// Write past the end or add to a directory.
    pub const EXTEND: u32 = 0x08;
    /// Delete from a directory.
    pub const DELETE: u32 = 0x10;
    /// Execute a file.
    pub const EXECUTE: u32 = 0x20;
}

/// The bits of FSINFO's `properties` (`FSF3_*`).
pub mod fsf {
    /// Hard links are supported.
    pub const LINK: u32 = 0x01;
    /// Symbolic links are supported.
    pub const SYMLINK: u32 = 0x02;
    /// PATHCONF is the same for every file.
    pub const HOMOGENEOUS: u32 = 0x08;
    /// SETATTR can set times to the client's.
    pub const CANSETTIME: u32 = 0x10;
}

/// A file handle (`nfs_fh3`): at most 64 opaque bytes, kept inline (no allocation).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileHandle {
    len: u8,
    bytes: [u8; FHSIZE],
}

impl FileHandle {
    /// A handle of these bytes; `None` if longer than 64.
    pub fn new(bytes: &[u8]) -> Option<FileHandle> {
        let mut handle = FileHandle { len: bytes.len().try_into().ok()?, bytes: [0; FHSIZE] };
        handle.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(handle)
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl core::fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FileHandle(")?;
        for byte in self.as_bytes() {
            write!(f, "{byte:02x}")?;
        }
        f.write_str(")")
    }
}

impl Xdr for FileHandle {
    fn encode(&self, e: &mut Encoder) {
        e.opaque(self.as_bytes());
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        let bytes = d.opaque(FHSIZE)?;
        Ok(FileHandle::new(bytes).expect("at most FHSIZE bytes"))
    }
}

/// A file name or path (`filename3`, `nfspath3`): bytes, at most [`MAX_PATH`] of them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Name(pub Vec<u8>);

impl Xdr for Name {
    fn encode(&self, e: &mut Encoder) {
        e.opaque(&self.0);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        d.opaque_vec(MAX_PATH).map(Name)
    }
}

impl From<&[u8]> for Name {
    fn from(bytes: &[u8]) -> Name {
        Name(bytes.to_vec())
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name(text.as_bytes().to_vec())
    }
}

/// A result switched on `nfsstat3`: the success arm, or the status and the failure arm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Res<T, F> {
    /// NFS3_OK and the results.
    Ok(T),
    /// An error status and what the RFC sends with it.
    Err(Status, F),
}

impl<T: Xdr, F: Xdr> Xdr for Res<T, F> {
    fn encode(&self, e: &mut Encoder) {
        match self {
            Res::Ok(ok) => {
                e.u32(Status::Ok as u32);
                ok.encode(e);
            }
            Res::Err(status, fail) => {
                status.encode(e);
                fail.encode(e);
            }
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        match Status::decode(d)? {
            Status::Ok => Ok(Res::Ok(T::decode(d)?)),
            status => Ok(Res::Err(status, F::decode(d)?)),
        }
    }
}

xdr_struct! {
    /// `specdata3`: a device's major and minor numbers.
    #[derive(Copy, Default)]
    pub struct SpecData {
        /// Major.
        pub major: u32,
        /// Minor.
        pub minor: u32,
    }
}

xdr_struct! {
    /// `nfstime3`.
    #[derive(Copy, Default, Hash)]
    pub struct Time {
        /// Seconds since 1970.
        pub seconds: u32,
        /// Nanoseconds.
        pub nseconds: u32,
    }
}

impl Time {
    /// Whole seconds.
    pub const fn from_seconds(seconds: u32) -> Time {
        Time { seconds, nseconds: 0 }
    }
}

xdr_struct! {
    /// `fattr3`: a file's attributes.
    #[derive(Copy)]
    pub struct Fattr3 {
        /// What it is.
        pub kind: FileType,
        /// Permission bits (and set-id, sticky).
        pub mode: u32,
        /// Hard links.
        pub nlink: u32,
        /// Owner.
        pub uid: u32,
        /// Group.
        pub gid: u32,
        /// Size in bytes.
        pub size: u64,
        /// Bytes of disk used.
        pub used: u64,
        /// Device numbers of a device file.
        pub rdev: SpecData,
        /// The file system's id.
        pub fsid: u64,
        /// The file's number in the file system.
        pub fileid: u64,
        /// Last access.
        pub atime: Time,
        /// Last change of the data.
        pub mtime: Time,
        /// Last change of the attributes.
        pub ctime: Time,
    }
}

/// `post_op_attr`.
pub type PostOpAttr = Option<Fattr3>;

xdr_struct! {
    /// `wcc_attr`: the attributes weak cache consistency checks compare.
    #[derive(Copy)]
    pub struct WccAttr {
        /// Size.
        pub size: u64,
        /// Last change of the data.
        pub mtime: Time,
        /// Last change of the attributes.
        pub ctime: Time,
    }
}

impl From<&Fattr3> for WccAttr {
    fn from(a: &Fattr3) -> WccAttr {
        WccAttr { size: a.size, mtime: a.mtime, ctime: a.ctime }
    }
}

/// `pre_op_attr`.
pub type PreOpAttr = Option<WccAttr>;

xdr_struct! {
    /// `wcc_data`: attributes before and after an operation.
    #[derive(Copy, Default)]
    pub struct WccData {
        /// Before.
        pub before: PreOpAttr,
        /// After.
        pub after: PostOpAttr,
    }
}

/// `post_op_fh3`.
pub type PostOpFh = Option<FileHandle>;

xdr_enum! {
    /// `time_how`.
    pub enum TimeHow {
        /// Leave it.
        DontChange = 0,
        /// The server's clock.
        ServerTime = 1,
        /// The time given.
        ClientTime = 2,
    }
}

/// `set_atime` / `set_mtime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetTime {
    /// Leave it.
    #[default]
    DontChange,
    /// The server's clock.
    ServerTime,
    /// This time.
    ClientTime(Time),
}

impl Xdr for SetTime {
    fn encode(&self, e: &mut Encoder) {
        match self {
            SetTime::DontChange => e.u32(TimeHow::DontChange as u32),
            SetTime::ServerTime => e.u32(TimeHow::ServerTime as u32),
            SetTime::ClientTime(time) => {
                e.u32(TimeHow::ClientTime as u32);
                time.encode(e);
            }
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        Ok(match TimeHow::decode(d)? {
            TimeHow::DontChange => SetTime::DontChange,
            TimeHow::ServerTime => SetTime::ServerTime,
            TimeHow::ClientTime => SetTime::ClientTime(Time::decode(d)?),
        })
    }
}

xdr_struct! {
    /// `sattr3`: attributes to set; `None` leaves one alone.
    #[derive(Copy, Default)]
    pub struct Sattr3 {
        /// Permission bits.
        pub mode: Option<u32>,
        /// Owner.
        pub uid: Option<u32>,
        /// Group.
        pub gid: Option<u32>,
        /// Size.
        pub size: Option<u64>,
        /// Last access.
        pub atime: SetTime,
        /// Last change of the data.
        pub mtime: SetTime,
    }
}

xdr_struct! {
    /// `diropargs3`: a name in a directory.
    pub struct DirOpArgs {
        /// The directory.
        pub dir: FileHandle,
        /// The name.
        pub name: Name,
    }
}

xdr_struct! {
    /// `GETATTR3args`.
    pub struct GetattrArgs {
        /// The object.
        pub object: FileHandle,
    }
}

/// `GETATTR3res`.
pub type GetattrRes = Res<Fattr3, ()>;

xdr_struct! {
    /// `SETATTR3args`.
    pub struct SetattrArgs {
        /// The object.
        pub object: FileHandle,
        /// What to change.
        pub new_attributes: Sattr3,
        /// `sattrguard3`: change only if the object's ctime is this (else NOT_SYNC).
        pub guard: Option<Time>,
    }
}

/// `SETATTR3res`.
pub type SetattrRes = Res<WccData, WccData>;

xdr_struct! {
    /// `LOOKUP3args`.
    pub struct LookupArgs {
        /// The directory and name.
        pub what: DirOpArgs,
    }
}

xdr_struct! {
    /// `LOOKUP3resok`.
    pub struct LookupOk {
        /// The handle found.
        pub object: FileHandle,
        /// Its attributes.
        pub obj_attributes: PostOpAttr,
        /// The directory's.
        pub dir_attributes: PostOpAttr,
    }
}

/// `LOOKUP3res`.
pub type LookupRes = Res<LookupOk, PostOpAttr>;

xdr_struct! {
    /// `ACCESS3args`.
    pub struct AccessArgs {
        /// The object.
        pub object: FileHandle,
        /// The [`access`] bits asked about.
        pub access: u32,
    }
}

xdr_struct! {
    /// `ACCESS3resok`.
    pub struct AccessOk {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
        /// The bits granted.
        pub access: u32,
    }
}

/// `ACCESS3res`.
pub type AccessRes = Res<AccessOk, PostOpAttr>;

xdr_struct! {
    /// `READLINK3args`.
    pub struct ReadlinkArgs {
        /// The link.
        pub symlink: FileHandle,
    }
}

xdr_struct! {
    /// `READLINK3resok`.
    pub struct ReadlinkOk {
        /// The link's attributes.
        pub symlink_attributes: PostOpAttr,
        /// Its target.
        pub data: Name,
    }
}

/// `READLINK3res`.
pub type ReadlinkRes = Res<ReadlinkOk, PostOpAttr>;

xdr_struct! {
    /// `READ3args`.
    pub struct ReadArgs {
        /// The file.
        pub file: FileHandle,
        /// Where to start.
        pub offset: u64,
        /// How many bytes.
        pub count: u32,
    }
}

xdr_struct! {
    /// `READ3resok`.
    pub struct ReadOk {
        /// The file's attributes.
        pub file_attributes: PostOpAttr,
        /// How many bytes were read.
        pub count: u32,
        /// Whether the read reached the end of the file.
        pub eof: bool,
        /// The bytes.
        pub data: Vec<u8>,
    }
}

/// `READ3res`.
pub type ReadRes = Res<ReadOk, PostOpAttr>;

xdr_struct! {
    /// `WRITE3args` up to its data.
    pub struct WriteHead {
        /// The file.
        pub file: FileHandle,
        /// Where to write.
        pub offset: u64,
        /// How many bytes (the length of the data).
        pub count: u32,
        /// How stable the data must be before the reply.
        pub stable: StableHow,
    }
}

xdr_struct! {
    /// `WRITE3args`.
    pub struct WriteArgs {
        /// Everything but the bytes.
        pub head: WriteHead,
        /// The bytes.
        pub data: Vec<u8>,
    }
}

impl WriteHead {
    /// `WRITE3args` with its bytes left where they are: the fixed part, and the bytes borrowed
    /// from the request (a server writes them from there, with no copy of its own).
    ///
    /// # Errors
    /// As [`WriteArgs`]'s decoding.
    pub fn decode_with_data<'a>(d: &mut Decoder<'a>) -> Result<(WriteHead, &'a [u8]), XdrError> {
        Ok((WriteHead::decode(d)?, d.opaque(usize::MAX)?))
    }
}

xdr_struct! {
    /// `WRITE3resok`.
    pub struct WriteOk {
        /// The file before and after.
        pub file_wcc: WccData,
        /// How many bytes were written.
        pub count: u32,
        /// How stable they are.
        pub committed: StableHow,
        /// The server's write verifier; a change tells the client to send again what it did
        /// not COMMIT.
        pub verf: [u8; VERIFIER_SIZE],
    }
}

/// `WRITE3res`.
pub type WriteRes = Res<WriteOk, WccData>;

/// `createhow3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateHow {
    /// UNCHECKED with the attributes to set.
    Unchecked(Sattr3),
    /// GUARDED with the attributes to set.
    Guarded(Sattr3),
    /// EXCLUSIVE with the client's verifier.
    Exclusive([u8; VERIFIER_SIZE]),
}

impl Xdr for CreateHow {
    fn encode(&self, e: &mut Encoder) {
        match self {
            CreateHow::Unchecked(attributes) => {
                e.u32(CreateMode::Unchecked as u32);
                attributes.encode(e);
            }
            CreateHow::Guarded(attributes) => {
                e.u32(CreateMode::Guarded as u32);
                attributes.encode(e);
            }
            CreateHow::Exclusive(verifier) => {
                e.u32(CreateMode::Exclusive as u32);
                e.fixed_opaque(verifier);
            }
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        Ok(match CreateMode::decode(d)? {
            CreateMode::Unchecked => CreateHow::Unchecked(Sattr3::decode(d)?),
            CreateMode::Guarded => CreateHow::Guarded(Sattr3::decode(d)?),
            CreateMode::Exclusive => CreateHow::Exclusive(d.array()?),
        })
    }
}

xdr_struct! {
    /// `CREATE3args`.
    pub struct CreateArgs {
        /// Where.
        pub place: DirOpArgs,
        /// How.
        pub how: CreateHow,
    }
}

xdr_struct! {
    /// `CREATE3resok`, also MKDIR's, SYMLINK's and MKNOD's.
    pub struct CreateOk {
        /// The new object's handle.
        pub obj: PostOpFh,
        /// Its attributes.
        pub obj_attributes: PostOpAttr,
        /// The directory before and after.
        pub dir_wcc: WccData,
    }
}

/// `CREATE3res`, `MKDIR3res`, `SYMLINK3res`, `MKNOD3res`.
pub type CreateRes = Res<CreateOk, WccData>;

xdr_struct! {
    /// `MKDIR3args`.
    pub struct MkdirArgs {
        /// Where.
        pub place: DirOpArgs,
        /// Its attributes.
        pub attributes: Sattr3,
    }
}

xdr_struct! {
    /// `SYMLINK3args` (with `symlinkdata3` inlined).
    pub struct SymlinkArgs {
        /// Where.
        pub place: DirOpArgs,
        /// The link's attributes.
        pub symlink_attributes: Sattr3,
        /// Its target.
        pub symlink_data: Name,
    }
}

/// `mknoddata3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MknodData {
    /// A character or block device, its attributes and numbers.
    Device(FileType, Sattr3, SpecData),
    /// A socket or named pipe, its attributes.
    Pipe(FileType, Sattr3),
    /// Another type (regular, directory, symlink: for which MKNOD is the wrong call).
    Other(FileType),
}

impl Xdr for MknodData {
    fn encode(&self, e: &mut Encoder) {
        match self {
            MknodData::Device(kind, attributes, spec) => {
                kind.encode(e);
                attributes.encode(e);
                spec.encode(e);
            }
            MknodData::Pipe(kind, attributes) => {
                kind.encode(e);
                attributes.encode(e);
            }
            MknodData::Other(kind) => kind.encode(e),
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        let kind = FileType::decode(d)?;
        Ok(match kind {
            FileType::Character | FileType::Block => MknodData::Device(kind, Sattr3::decode(d)?, SpecData::decode(d)?),
            FileType::Socket | FileType::Fifo => MknodData::Pipe(kind, Sattr3::decode(d)?),
            _ => MknodData::Other(kind),
        })
    }
}

xdr_struct! {
    /// `MKNOD3args`.
    pub struct MknodArgs {
        /// Where.
        pub place: DirOpArgs,
        /// What.
        pub what: MknodData,
    }
}

/// `REMOVE3res`, `RMDIR3res`: the directory's wcc data either way.
pub type RemoveRes = Res<WccData, WccData>;

xdr_struct! {
    /// `RENAME3args`.
    pub struct RenameArgs {
        /// The name now.
        pub from: DirOpArgs,
        /// The new name.
        pub to: DirOpArgs,
    }
}

xdr_struct! {
    /// `RENAME3resok` and `RENAME3resfail`.
    #[derive(Copy, Default)]
    pub struct RenameWcc {
        /// The source directory.
        pub fromdir_wcc: WccData,
        /// The target directory.
        pub todir_wcc: WccData,
    }
}

/// `RENAME3res`.
pub type RenameRes = Res<RenameWcc, RenameWcc>;

xdr_struct! {
    /// `LINK3args`.
    pub struct LinkArgs {
        /// The file.
        pub file: FileHandle,
        /// Its new name.
        pub link: DirOpArgs,
    }
}

xdr_struct! {
    /// `LINK3resok` and `LINK3resfail`.
    #[derive(Copy, Default)]
    pub struct LinkWcc {
        /// The file's attributes.
        pub file_attributes: PostOpAttr,
        /// The directory.
        pub linkdir_wcc: WccData,
    }
}

/// `LINK3res`.
pub type LinkRes = Res<LinkWcc, LinkWcc>;

xdr_struct! {
    /// `READDIR3args`.
    pub struct ReaddirArgs {
        /// The directory.
        pub dir: FileHandle,
        /// Where to go on (0: the start).
        pub cookie: u64,
        /// The verifier the cookie came with.
        pub cookieverf: [u8; VERIFIER_SIZE],
        /// The largest reply the client takes, in bytes.
        pub count: u32,
    }
}

xdr_struct! {
    /// `entry3`.
    pub struct Entry {
        /// The file's number.
        pub fileid: u64,
        /// Its name.
        pub name: Name,
        /// Where the listing goes on after it.
        pub cookie: u64,
    }
}

/// `READDIR3resok` and `READDIRPLUS3resok` (with `dirlist3` and `dirlistplus3` inlined): the
/// two differ only in their entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirList<E> {
    /// The directory's attributes.
    pub dir_attributes: PostOpAttr,
    /// The cookie verifier.
    pub cookieverf: [u8; VERIFIER_SIZE],
    /// The entries.
    pub entries: Vec<E>,
    /// Whether the last entry is among them.
    pub eof: bool,
}

impl<E: Xdr> Xdr for DirList<E> {
    fn encode(&self, e: &mut Encoder) {
        self.dir_attributes.encode(e);
        e.fixed_opaque(&self.cookieverf);
        crate::xdr::encode_list(e, &self.entries);
        e.bool(self.eof);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, XdrError> {
        Ok(DirList {
            dir_attributes: PostOpAttr::decode(d)?,
            cookieverf: d.array()?,
            entries: crate::xdr::decode_list(d)?,
            eof: d.bool()?,
        })
    }
}

/// `READDIR3resok`.
pub type ReaddirOk = DirList<Entry>;

/// `READDIR3res`.
pub type ReaddirRes = Res<ReaddirOk, PostOpAttr>;

xdr_struct! {
    /// `READDIRPLUS3args`.
    pub struct ReaddirplusArgs {
        /// The directory.
        pub dir: FileHandle,
        /// Where to go on (0: the start).
        pub cookie: u64,
        /// The verifier the cookie came with.
        pub cookieverf: [u8; VERIFIER_SIZE],
        /// The most bytes of directory information (names, ids, cookies).
        pub dircount: u32,
        /// The largest reply the client takes, in bytes.
        pub maxcount: u32,
    }
}

xdr_struct! {
    /// `entryplus3`.
    pub struct EntryPlus {
        /// The file's number.
        pub fileid: u64,
        /// Its name.
        pub name: Name,
        /// Where the listing goes on after it.
        pub cookie: u64,
        /// Its attributes.
        pub name_attributes: PostOpAttr,
        /// Its handle.
        pub name_handle: PostOpFh,
    }
}

/// `READDIRPLUS3resok`.
pub type ReaddirplusOk = DirList<EntryPlus>;

/// `READDIRPLUS3res`.
pub type ReaddirplusRes = Res<ReaddirplusOk, PostOpAttr>;

xdr_struct! {
    /// `FSSTAT3args`.
    pub struct FsstatArgs {
        /// Any handle of the file system.
        pub fsroot: FileHandle,
    }
}

xdr_struct! {
    /// `FSSTAT3resok`.
    pub struct FsstatOk {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
        /// Total bytes.
        pub tbytes: u64,
        /// Free bytes.
        pub fbytes: u64,
        /// Free bytes available to the caller.
        pub abytes: u64,
        /// Total file slots.
        pub tfiles: u64,
        /// Free file slots.
        pub ffiles: u64,
        /// Free file slots available to the caller.
        pub afiles: u64,
        /// Seconds for which the figures will not change (0: they may).
        pub invarsec: u32,
    }
}

/// `FSSTAT3res`.
pub type FsstatRes = Res<FsstatOk, PostOpAttr>;

xdr_struct! {
    /// `FSINFO3args`.
    pub struct FsinfoArgs {
        /// The root's handle.
        pub fsroot: FileHandle,
    }
}

xdr_struct! {
    /// `FSINFO3resok`.
    pub struct FsinfoOk {
        /// The root's attributes.
        pub obj_attributes: PostOpAttr,
        /// Largest READ.
        pub rtmax: u32,
        /// Preferred READ.
        pub rtpref: u32,
        /// READ size multiple.
        pub rtmult: u32,
        /// Largest WRITE.
        pub wtmax: u32,
        /// Preferred WRITE.
        pub wtpref: u32,
        /// WRITE size multiple.
        pub wtmult: u32,
        /// Preferred READDIR size.
        pub dtpref: u32,
        /// Largest file.
        pub maxfilesize: u64,
        /// Time granularity.
        pub time_delta: Time,
        /// [`fsf`] bits.
        pub properties: u32,
    }
}

/// `FSINFO3res`.
pub type FsinfoRes = Res<FsinfoOk, PostOpAttr>;

xdr_struct! {
    /// `PATHCONF3args`.
    pub struct PathconfArgs {
        /// The object.
        pub object: FileHandle,
    }
}

xdr_struct! {
    /// `PATHCONF3resok`.
    pub struct PathconfOk {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
        /// Most hard links.
        pub linkmax: u32,
        /// Longest name.
        pub name_max: u32,
        /// Over-long names are refused, not truncated.
        pub no_trunc: bool,
        /// Only root may chown.
        pub chown_restricted: bool,
        /// Names are compared without case.
        pub case_insensitive: bool,
        /// Names keep their case.
        pub case_preserving: bool,
    }
}

/// `PATHCONF3res`.
pub type PathconfRes = Res<PathconfOk, PostOpAttr>;

xdr_struct! {
    /// `COMMIT3args`.
    pub struct CommitArgs {
        /// The file.
        pub file: FileHandle,
        /// From where.
        pub offset: u64,
        /// How many bytes (0: to the end).
        pub count: u32,
    }
}

xdr_struct! {
    /// `COMMIT3resok`.
    pub struct CommitOk {
        /// The file before and after.
        pub file_wcc: WccData,
        /// The write verifier.
        pub verf: [u8; VERIFIER_SIZE],
    }
}

/// `COMMIT3res`.
pub type CommitRes = Res<CommitOk, WccData>;

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    fn attributes() -> Fattr3 {
        Fattr3 {
            kind: FileType::Regular,
            mode: 0o644,
            nlink: 1,
            uid: 1000,
            gid: 100,
            size: 0x1_0000_0002,
            used: 4096,
            rdev: SpecData::default(),
            fsid: 7,
            fileid: 12,
            atime: Time { seconds: 1, nseconds: 2 },
            mtime: Time::from_seconds(3),
            ctime: Time::from_seconds(4),
        }
    }

    /// `fattr3` is 21 words in the order of RFC 1813 §2.5.
    #[test]
    fn fattr3_layout() {
        let expected = words(&[1, 0o644, 1, 1000, 100, 1, 2, 0, 4096, 0, 0, 0, 7, 0, 12, 1, 2, 3, 0, 4, 0]);
        assert_eq!(attributes().to_xdr(), expected);
        assert_eq!(Fattr3::from_xdr(&expected), Ok(attributes()));
    }

    #[test]
    fn getattr_result_layout() {
        let ok: GetattrRes = Res::Ok(attributes());
        let bytes = ok.to_xdr();
        assert_eq!(&bytes[..4], [0, 0, 0, 0]);
        assert_eq!(bytes.len(), 4 + 84);
        assert_eq!(GetattrRes::from_xdr(&bytes), Ok(ok));
        let stale: GetattrRes = Res::Err(Status::Stale, ());
        assert_eq!(stale.to_xdr(), words(&[70]));
        assert_eq!(GetattrRes::from_xdr(&words(&[10001])), Ok(Res::Err(Status::BadHandle, ())));
        assert_eq!(GetattrRes::from_xdr(&words(&[12345])), Err(XdrError::BadValue));
    }

    #[test]
    fn lookup_arguments_layout() {
        let args =
            LookupArgs { what: DirOpArgs { dir: FileHandle::new(&[1, 2, 3, 4, 5]).unwrap(), name: "ab".into() } };
        let expected = [0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 2, b'a', b'b', 0, 0];
        assert_eq!(args.to_xdr(), expected);
        assert_eq!(LookupArgs::from_xdr(&expected), Ok(args));
    }

    #[test]
    fn file_handles_are_at_most_64_bytes() {
        let mut long = words(&[65]);
        long.extend_from_slice(&[0; 68]);
        assert_eq!(FileHandle::from_xdr(&long), Err(XdrError::TooLong));
        assert!(FileHandle::new(&[0; 65]).is_none());
        let max = FileHandle::new(&[9; 64]).unwrap();
        assert_eq!(FileHandle::from_xdr(&max.to_xdr()), Ok(max));
    }

    #[test]
    fn sattr3_and_setattr_layout() {
        let set = Sattr3 {
            mode: Some(0o600),
            size: Some(0),
            mtime: SetTime::ClientTime(Time::from_seconds(9)),
            ..Sattr3::default()
        };
        let expected = words(&[1, 0o600, 0, 0, 1, 0, 0, 0, 2, 9, 0]);
        assert_eq!(set.to_xdr(), expected);
        assert_eq!(Sattr3::from_xdr(&expected), Ok(set));
        let args = SetattrArgs {
            object: FileHandle::new(&[]).unwrap(),
            new_attributes: Sattr3::default(),
            guard: Some(Time::from_seconds(4)),
        };
        assert_eq!(args.to_xdr(), words(&[0, 0, 0, 0, 0, 0, 0, 1, 4, 0]));
        assert_eq!(Sattr3::from_xdr(&words(&[0, 0, 0, 0, 3, 0])), Err(XdrError::BadValue));
    }

    #[test]
    fn write_and_create_round_trip() {
        let handle = FileHandle::new(&[7; 24]).unwrap();
        let head = WriteHead { file: handle, offset: 8192, count: 3, stable: StableHow::Unstable };
        let write = WriteArgs { head: head.clone(), data: b"xyz".to_vec() };
        let bytes = write.to_xdr();
        assert_eq!(&bytes[28..], words(&[0, 8192, 3, 0, 3, u32::from_be_bytes(*b"xyz\0")]).as_slice());
        assert_eq!(WriteArgs::from_xdr(&bytes), Ok(write));
        let mut d = Decoder::new(&bytes);
        assert_eq!(WriteHead::decode_with_data(&mut d), Ok((head, &b"xyz"[..])));
        assert_eq!(d.remaining(), 0, "the padding is read too");
        let cut = &bytes[..bytes.len() - 4];
        assert_eq!(WriteHead::decode_with_data(&mut Decoder::new(cut)), Err(XdrError::Truncated));
        let result: WriteRes =
            Res::Ok(WriteOk { file_wcc: WccData::default(), count: 3, committed: StableHow::FileSync, verf: [1; 8] });
        assert_eq!(WriteRes::from_xdr(&result.to_xdr()), Ok(result));
        for how in [
            CreateHow::Unchecked(Sattr3::default()),
            CreateHow::Guarded(Sattr3::default()),
            CreateHow::Exclusive([5; 8]),
        ] {
            let args = CreateArgs { place: DirOpArgs { dir: handle, name: "f".into() }, how };
            assert_eq!(CreateArgs::from_xdr(&args.to_xdr()), Ok(args));
        }
        let created: CreateRes =
            Res::Ok(CreateOk { obj: Some(handle), obj_attributes: Some(attributes()), dir_wcc: WccData::default() });
        assert_eq!(CreateRes::from_xdr(&created.to_xdr()), Ok(created));
    }

    #[test]
    fn readdirplus_round_trip() {
        let ok: ReaddirplusRes = Res::Ok(ReaddirplusOk {
            dir_attributes: None,
            cookieverf: [3; 8],
            entries: vec![
                EntryPlus {
                    fileid: 2,
                    name: ".".into(),
                    cookie: 1,
                    name_attributes: Some(attributes()),
                    name_handle: None,
                },
                EntryPlus {
                    fileid: 12,
                    name: "file".into(),
                    cookie: 2,
                    name_attributes: None,
                    name_handle: FileHandle::new(&[1]),
                },
            ],
            eof: true,
        });
        assert_eq!(ReaddirplusRes::from_xdr(&ok.to_xdr()), Ok(ok));
        let dir: ReaddirRes = Res::Ok(ReaddirOk {
            dir_attributes: None,
            cookieverf: [0; 8],
            entries: vec![Entry { fileid: 2, name: "a".into(), cookie: 7 }],
            eof: false,
        });
        // status, no attributes, verifier, TRUE, fileid, "a", cookie, FALSE, eof.
        let mut expected = words(&[0, 0, 0, 0, 1, 0, 2, 1]);
        expected.extend_from_slice(&[b'a', 0, 0, 0]);
        expected.extend(words(&[0, 7, 0, 0]));
        assert_eq!(dir.to_xdr(), expected);
    }

    #[test]
    fn mknod_and_the_rest_round_trip() {
        let place = DirOpArgs { dir: FileHandle::new(&[1]).unwrap(), name: "n".into() };
        for what in [
            MknodData::Device(FileType::Character, Sattr3::default(), SpecData { major: 1, minor: 3 }),
            MknodData::Pipe(FileType::Fifo, Sattr3::default()),
            MknodData::Other(FileType::Regular),
        ] {
            let args = MknodArgs { place: place.clone(), what };
            assert_eq!(MknodArgs::from_xdr(&args.to_xdr()), Ok(args));
        }
        let info: FsinfoRes = Res::Ok(FsinfoOk {
            obj_attributes: None,
            rtmax: 65536,
            rtpref: 65536,
            rtmult: 4096,
            wtmax: 65536,
            wtpref: 65536,
            wtmult: 4096,
            dtpref: 8192,
            maxfilesize: u64::MAX,
            time_delta: Time::from_seconds(1),
            properties: fsf::LINK | fsf::SYMLINK,
        });
        assert_eq!(FsinfoRes::from_xdr(&info.to_xdr()), Ok(info));
        let rename: RenameRes = Res::Err(Status::NotEmpty, RenameWcc::default());
        assert_eq!(rename.to_xdr(), words(&[66, 0, 0, 0, 0]));
        let path: PathconfRes = Res::Ok(PathconfOk {
            obj_attributes: None,
            linkmax: 32000,
            name_max: 255,
            no_trunc: true,
            chown_restricted: true,
            case_insensitive: false,
            case_preserving: true,
        });
        assert_eq!(PathconfRes::from_xdr(&path.to_xdr()), Ok(path));
    }
}
