//! One RPC in, one RPC out: decodes a call, answers NFSv3 and MOUNT v3 from the file system,
//! encodes the reply. Shared by every server thread (its state is read-only but for the mount
//! list), so calls on UDP and on every TCP connection overlap.

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use domos_interfaces::inode_file_system::{
    self as fs, Attributes, Changes, FileKind, Filled, FsError, InodeFileSystem, Node,
};
use domos_nfs::mount::{self, DirPath, Export, Exports, MountEntry, MountList, MountResult, MountStatus};
use domos_nfs::nfs3::{self, *};
use domos_nfs::rpc::{self, Caller, Message, ReplyStatus, auth_stat, flavor};
use domos_nfs::xdr::{self, Decoder, Encoder, Xdr};
use domos_sdk::{Memory, Mutex, Portal};

use crate::handle;

/// How a reply travels, which bounds its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A datagram: the stack sends at most 8 KiB.
    Udp,
    /// A TCP stream.
    Tcp,
}

impl Transport {
    /// The most file data in one READ or WRITE.
    pub const fn max_data(self) -> u32 {
        match self {
            Transport::Udp => 4096,
            Transport::Tcp => 64 * 1024,
        }
    }

    /// The largest READDIR / READDIRPLUS reply.
    const fn max_listing(self) -> u32 {
        match self {
            Transport::Udp => 7 * 1024,
            Transport::Tcp => 32 * 1024,
        }
    }
}

/// Bytes of a READDIR reply besides its entries: status, attributes, verifier, list end, eof.
const READDIR_OVERHEAD: usize = 4 + 88 + 8 + 4 + 4;

/// READ3resok's fixed part with the file's attributes: the status, `post_op_attr` (a flag and
/// an 84-byte `fattr3`), `count`, `eof` and the data's length.
const READ_HEAD: usize = 4 + 4 + 84 + 4 + 4 + 4;
/// The most entries asked of the file system at once.
const MAX_ENTRIES: u32 = 256;
/// The longest name a file may have (ext2's).
const NAME_MAX: usize = 255;

/// The server: the file system it exports and what identifies this boot.
pub struct Server {
    fs: Portal<dyn InodeFileSystem>,
    fsid: u32,
    root: Node,
    /// The write verifier: different at every start of the server, so a client learns that data
    /// it wrote UNSTABLE and did not COMMIT may be lost, and sends it again.
    verifier: [u8; 8],
    /// The exported path (MOUNT).
    export: Vec<u8>,
    /// Who mounted what (MOUNT DUMP): bounded, oldest forgotten first.
    mounts: Mutex<Vec<MountEntry>>,
}

/// The most mounts remembered for DUMP.
const MAX_MOUNTS: usize = 64;

type Answer<T> = Result<T, Status>;

fn status(error: FsError) -> Status {
    match error {
        FsError::NotFound => Status::NoEnt,
        FsError::Exists => Status::Exist,
        FsError::NotDirectory => Status::NotDir,
        FsError::IsDirectory => Status::IsDir,
        FsError::NotEmpty => Status::NotEmpty,
        FsError::NoSpace => Status::NoSpc,
        FsError::NameTooLong => Status::NameTooLong,
        FsError::ReadOnly => Status::RoFs,
        FsError::Corrupt(_) | FsError::Io => Status::Io,
        FsError::Unsupported(_) => Status::NotSupp,
        FsError::Invalid(_) => Status::Inval,
        FsError::Stale => Status::Stale,
        FsError::TooLarge => Status::FBig,
        FsError::TooManyLinks => Status::MLink,
        FsError::Call(_) => Status::ServerFault,
    }
}

fn time(seconds: u32) -> Time {
    Time::from_seconds(seconds)
}

fn set_time(how: SetTime) -> Option<fs::SetTime> {
    match how {
        SetTime::DontChange => None,
        SetTime::ServerTime => Some(fs::SetTime::Now),
        SetTime::ClientTime(t) => Some(fs::SetTime::To(t.seconds)),
    }
}

fn changes(set: &Sattr3) -> Changes {
    Changes {
        permissions: set.mode.map(|m| (m & 0o7777) as u16),
        uid: set.uid,
        gid: set.gid,
        size: set.size,
        atime: set_time(set.atime),
        mtime: set_time(set.mtime),
    }
}

fn is_empty(c: &Changes) -> bool {
    *c == Changes::default()
}

/// A name a client may create or remove: one component, not `.` or `..`, at most 255 bytes.
/// (LOOKUP takes `.` and `..`, which the file system resolves without leaving the export.)
fn check_name(name: &Name) -> Answer<&[u8]> {
    let bytes = name.0.as_slice();
    if bytes.len() > NAME_MAX {
        return Err(Status::NameTooLong);
    }
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') || bytes.contains(&0) {
        return Err(Status::Inval);
    }
    Ok(bytes)
}

impl Server {
    /// A server exporting `fs`'s root at `export`.
    pub fn new(
        fs: Portal<dyn InodeFileSystem>,
        fsid: u32,
        verifier: [u8; 8],
        export: Vec<u8>,
    ) -> Result<Server, FsError> {
        let root = fs.root()?;
        Ok(Server { fs, fsid, root, verifier, export, mounts: Mutex::new(Vec::new()) })
    }

    /// The directory a MOUNT path names: the export, or a directory below it reached name by
    /// name (libnfs mounts the directory of the file a URL names). An empty path is the export
    /// when the export is `/`; `.` and `..` are refused, so no path leaves the export.
    fn mount_point(&self, path: &[u8]) -> Result<Node, MountStatus> {
        let export = self.export.as_slice();
        let below = if export == b"/" {
            path
        } else {
            match path.strip_prefix(export) {
                Some(rest) if rest.is_empty() || rest[0] == b'/' => rest,
                _ => return Err(MountStatus::NoEnt),
            }
        };
        let mut node = self.root;
        for name in below.split(|&b| b == b'/').filter(|n| !n.is_empty()) {
            if name == b"." || name == b".." {
                return Err(MountStatus::Access);
            }
            if name.len() > NAME_MAX {
                return Err(MountStatus::NameTooLong);
            }
            let found = self.fs.lookup(node, name.to_vec()).map_err(|e| match e {
                FsError::NotFound => MountStatus::NoEnt,
                FsError::NotDirectory => MountStatus::NotDir,
                _ => MountStatus::ServerFault,
            })?;
            if found.kind != FileKind::Directory {
                return Err(MountStatus::NotDir);
            }
            node = found.node;
        }
        Ok(node)
    }

    /// The attributes in NFS' form.
    fn fattr(&self, a: &Attributes) -> Fattr3 {
        let kind = match a.kind {
            FileKind::File => FileType::Regular,
            FileKind::Directory => FileType::Directory,
            FileKind::Symlink => FileType::Symlink,
            // The kind is in the mode's type bits.
            FileKind::Other => match a.mode & 0o170000 {
                0o020000 => FileType::Character,
                0o060000 => FileType::Block,
                0o010000 => FileType::Fifo,
                _ => FileType::Socket,
            },
        };
        Fattr3 {
            kind,
            mode: u32::from(a.mode & 0o7777),
            nlink: u32::from(a.links),
            uid: a.uid,
            gid: a.gid,
            size: a.size,
            used: a.blocks.saturating_mul(512),
            rdev: SpecData::default(),
            fsid: u64::from(self.fsid),
            fileid: u64::from(a.node.inode),
            atime: time(a.atime),
            mtime: time(a.mtime),
            ctime: time(a.ctime),
        }
    }

    fn node(&self, handle: &FileHandle) -> Answer<Node> {
        handle::decode(self.fsid, handle)
    }

    fn handle(&self, node: Node) -> FileHandle {
        handle::encode(self.fsid, node)
    }

    fn attributes(&self, node: Node) -> Answer<Attributes> {
        self.fs.attributes(node).map_err(status)
    }

    /// Post-operation attributes: `None` if they cannot be had.
    fn post(&self, node: Node) -> PostOpAttr {
        self.fs.attributes(node).ok().map(|a| self.fattr(&a))
    }

    /// Carries a change of the name space or of attributes to the disk before the reply, as
    /// RFC 1813 asks of every operation but an UNSTABLE WRITE.
    fn stable(&self) -> Answer<()> {
        self.fs.sync().map_err(status)
    }

    fn wcc_after(&self, node: Node) -> WccData {
        WccData { before: None, after: self.post(node) }
    }

    /// Answers one request, appending the whole reply message to `reply`. `false`: no reply (a
    /// message that is not a call, or whose header does not decode), the request is dropped.
    pub fn serve(&self, request: &[u8], transport: Transport, peer: u32, reply: &mut Encoder) -> bool {
        // What the caller put in front (a TCP record mark) stays when a reply is replaced.
        let start = reply.len();
        let mut d = Decoder::new(request);
        let Ok(Message::Call(call)) = Message::decode(&mut d) else {
            return false;
        };
        let xid = call.xid;
        let refuse = |reply: &mut Encoder, why: ReplyStatus| {
            rpc::encode_reply(reply, xid, &why);
            true
        };
        if call.rpc_version != rpc::RPC_VERSION {
            return refuse(reply, ReplyStatus::RpcMismatch { low: 2, high: 2 });
        }
        let Some(caller) = call.credential.caller() else {
            let why = match call.credential.flavor {
                flavor::AUTH_NONE | flavor::AUTH_SYS => auth_stat::AUTH_BADCRED,
                _ => auth_stat::AUTH_TOOWEAK,
            };
            return refuse(reply, ReplyStatus::AuthError(why));
        };
        match (call.program, call.version) {
            (nfs3::PROGRAM, nfs3::VERSION) => {}
            (mount::PROGRAM, mount::VERSION) => {}
            (nfs3::PROGRAM, _) => return refuse(reply, ReplyStatus::ProgramMismatch { low: 3, high: 3 }),
            (mount::PROGRAM, _) => return refuse(reply, ReplyStatus::ProgramMismatch { low: 3, high: 3 }),
            _ => return refuse(reply, ReplyStatus::ProgramUnavailable),
        }
        let request = Request { server: self, caller, transport, peer };
        let answered = if call.program == nfs3::PROGRAM {
            request.nfs(call.procedure, &mut d, xid, reply)
        } else {
            request.mount(call.procedure, &mut d, xid, reply)
        };
        match answered {
            Some(Ok(())) => {}
            Some(Err(())) => {
                reply.truncate(start);
                rpc::encode_reply(reply, xid, &ReplyStatus::GarbageArguments);
            }
            None => {
                reply.truncate(start);
                rpc::encode_reply(reply, xid, &ReplyStatus::ProcedureUnavailable);
            }
        }
        true
    }
}

/// One call being answered.
struct Request<'a> {
    server: &'a Server,
    caller: Caller,
    transport: Transport,
    peer: u32,
}

/// Decodes the arguments, answers, encodes SUCCESS and the result; `Err(())` for arguments
/// that do not decode (GARBAGE_ARGS).
fn answer<A: Xdr, R: Xdr>(
    d: &mut Decoder<'_>,
    xid: u32,
    reply: &mut Encoder,
    f: impl FnOnce(A) -> R,
) -> Result<(), ()> {
    answer_decoded(d, xid, reply, A::decode, f)
}

/// [`answer`] with arguments decoded by `decode` (which may borrow from the request).
fn answer_decoded<'a, A, R: Xdr>(
    d: &mut Decoder<'a>,
    xid: u32,
    reply: &mut Encoder,
    decode: impl FnOnce(&mut Decoder<'a>) -> Result<A, xdr::XdrError>,
    f: impl FnOnce(A) -> R,
) -> Result<(), ()> {
    let args = decode(d).map_err(|_| ())?;
    let result = f(args);
    rpc::encode_reply(reply, xid, &ReplyStatus::Success);
    result.encode(reply);
    Ok(())
}

fn res<T, F>(result: Answer<T>, fail: impl FnOnce() -> F) -> Res<T, F> {
    match result {
        Ok(ok) => Res::Ok(ok),
        Err(status) => Res::Err(status, fail()),
    }
}

impl Request<'_> {
    /// MOUNT v3; `None` for an unknown procedure.
    fn mount(&self, procedure: u32, d: &mut Decoder<'_>, xid: u32, reply: &mut Encoder) -> Option<Result<(), ()>> {
        let s = self.server;
        let host = || {
            let [a, b, c, e] = self.peer.to_be_bytes();
            format!("{a}.{b}.{c}.{e}").into_bytes()
        };
        Some(match procedure {
            mount::procedure::NULL => answer(d, xid, reply, |()| ()),
            mount::procedure::MNT => answer(d, xid, reply, |path: DirPath| {
                let node = match s.mount_point(&path.0) {
                    Ok(node) => node,
                    Err(status) => return MountResult::Err(status),
                };
                let mut mounts = s.mounts.lock();
                let entry = MountEntry { hostname: host(), directory: path.0 };
                if !mounts.contains(&entry) {
                    if mounts.len() == MAX_MOUNTS {
                        mounts.remove(0);
                    }
                    mounts.push(entry);
                }
                MountResult::Ok { handle: s.handle(node), flavors: vec![flavor::AUTH_SYS, flavor::AUTH_NONE] }
            }),
            mount::procedure::DUMP => answer(d, xid, reply, |()| MountList(s.mounts.lock().clone())),
            mount::procedure::UMNT => answer(d, xid, reply, |path: DirPath| {
                let host = host();
                s.mounts.lock().retain(|m| !(m.hostname == host && m.directory == path.0));
            }),
            mount::procedure::UMNTALL => answer(d, xid, reply, |()| {
                let host = host();
                s.mounts.lock().retain(|m| m.hostname != host);
            }),
            mount::procedure::EXPORT => {
                answer(d, xid, reply, |()| Exports(vec![Export { directory: s.export.clone(), groups: Vec::new() }]))
            }
            _ => return None,
        })
    }

    /// NFSv3; `None` for an unknown procedure.
    fn nfs(&self, procedure: u32, d: &mut Decoder<'_>, xid: u32, reply: &mut Encoder) -> Option<Result<(), ()>> {
        use nfs3::procedure as p;
        Some(match procedure {
            p::NULL => answer(d, xid, reply, |()| ()),
            p::GETATTR => answer(d, xid, reply, |a: GetattrArgs| -> GetattrRes { res(self.getattr(&a), || ()) }),
            p::SETATTR => answer(d, xid, reply, |a: SetattrArgs| -> SetattrRes { self.setattr(&a) }),
            p::LOOKUP => answer(d, xid, reply, |a: LookupArgs| -> LookupRes { self.lookup(&a) }),
            p::ACCESS => answer(d, xid, reply, |a: AccessArgs| -> AccessRes { self.access(&a) }),
            p::READLINK => answer(d, xid, reply, |a: ReadlinkArgs| -> ReadlinkRes { self.readlink(&a) }),
            p::READ => ReadArgs::decode(d).map_err(|_| ()).map(|a| {
                rpc::encode_reply(reply, xid, &ReplyStatus::Success);
                self.read(&a, reply);
            }),
            p::WRITE => answer_decoded(d, xid, reply, WriteHead::decode_with_data, |(a, data)| self.write(&a, data)),
            p::CREATE => answer(d, xid, reply, |a: CreateArgs| -> CreateRes { self.create(&a) }),
            p::MKDIR => answer(d, xid, reply, |a: MkdirArgs| -> CreateRes { self.mkdir(&a) }),
            p::SYMLINK => answer(d, xid, reply, |a: SymlinkArgs| -> CreateRes { self.symlink(&a) }),
            p::MKNOD => answer(d, xid, reply, |a: MknodArgs| -> CreateRes {
                let refused = match a.what {
                    MknodData::Other(_) => Status::BadType,
                    _ => Status::NotSupp,
                };
                Res::Err(refused, WccData::default())
            }),
            p::REMOVE => answer(d, xid, reply, |a: DirOpArgs| -> RemoveRes { self.remove(&a, false) }),
            p::RMDIR => answer(d, xid, reply, |a: DirOpArgs| -> RemoveRes { self.remove(&a, true) }),
            p::RENAME => answer(d, xid, reply, |a: RenameArgs| -> RenameRes { self.rename(&a) }),
            p::LINK => answer(d, xid, reply, |a: LinkArgs| -> LinkRes { self.link(&a) }),
            p::READDIR => answer(d, xid, reply, |a: ReaddirArgs| -> ReaddirRes { self.readdir(&a) }),
            p::READDIRPLUS => answer(d, xid, reply, |a: ReaddirplusArgs| -> ReaddirplusRes { self.readdirplus(&a) }),
            p::FSSTAT => answer(d, xid, reply, |a: FsstatArgs| -> FsstatRes { self.fsstat(&a) }),
            p::FSINFO => answer(d, xid, reply, |a: FsinfoArgs| -> FsinfoRes { self.fsinfo(&a) }),
            p::PATHCONF => answer(d, xid, reply, |a: PathconfArgs| -> PathconfRes { self.pathconf(&a) }),
            p::COMMIT => answer(d, xid, reply, |a: CommitArgs| -> CommitRes { self.commit(&a) }),
            _ => return None,
        })
    }

    fn getattr(&self, a: &GetattrArgs) -> Answer<Fattr3> {
        let s = self.server;
        Ok(s.fattr(&s.attributes(s.node(&a.object)?)?))
    }

    fn setattr(&self, a: &SetattrArgs) -> SetattrRes {
        let s = self.server;
        let mut before = None;
        let result = (|| {
            let node = s.node(&a.object)?;
            if let Some(guard) = a.guard {
                let now = s.attributes(node)?;
                before = Some(WccAttr::from(&s.fattr(&now)));
                if now.ctime != guard.seconds {
                    return Err(Status::NotSync);
                }
            }
            let after = s.fs.set_attributes(node, changes(&a.new_attributes)).map_err(status)?;
            s.stable()?;
            Ok(WccData { before, after: Some(s.fattr(&after)) })
        })();
        res(result, || WccData { before, after: None })
    }

    fn lookup(&self, a: &LookupArgs) -> LookupRes {
        let s = self.server;
        let mut dir_node = None;
        let result = (|| {
            let dir = s.node(&a.what.dir)?;
            dir_node = Some(dir);
            if a.what.name.0.len() > NAME_MAX {
                return Err(Status::NameTooLong);
            }
            let found = s.fs.lookup(dir, a.what.name.0.clone()).map_err(status)?;
            Ok(LookupOk { object: s.handle(found.node), obj_attributes: Some(s.fattr(&found)), dir_attributes: None })
        })();
        res(result, || dir_node.and_then(|n| s.post(n)))
    }

    fn access(&self, a: &AccessArgs) -> AccessRes {
        let s = self.server;
        let result = (|| {
            let attributes = s.attributes(s.node(&a.object)?)?;
            let fattr = s.fattr(&attributes);
            let granted = if self.caller.uid == 0 {
                a.access
            } else {
                let bits = if self.caller.uid == fattr.uid {
                    fattr.mode >> 6
                } else if self.caller.gid == fattr.gid {
                    fattr.mode >> 3
                } else {
                    fattr.mode
                } & 7;
                let directory = fattr.kind == FileType::Directory;
                let mut granted = 0;
                if bits & 4 != 0 {
                    granted |= access::READ;
                }
                if bits & 2 != 0 {
                    granted |= access::MODIFY | access::EXTEND | if directory { access::DELETE } else { 0 };
                }
                if bits & 1 != 0 {
                    granted |= if directory { access::LOOKUP } else { access::EXECUTE };
                }
                granted & a.access
            };
            Ok(AccessOk { obj_attributes: Some(fattr), access: granted })
        })();
        res(result, || None)
    }

    fn readlink(&self, a: &ReadlinkArgs) -> ReadlinkRes {
        let s = self.server;
        let result = (|| {
            let target = s.fs.readlink(s.node(&a.symlink)?).map_err(status)?;
            Ok(ReadlinkOk { symlink_attributes: None, data: Name(target) })
        })();
        res(result, || None)
    }

    /// READ's result, appended to `reply`: laid out in place, so that the file system copies
    /// the cached blocks straight into the reply (lent to it for the call) and the data is not
    /// copied again.
    fn read(&self, a: &ReadArgs, reply: &mut Encoder) {
        let start = reply.len();
        let mut bytes = core::mem::take(reply).into_vec();
        let result = self.read_in_place(a, &mut bytes, start);
        *reply = Encoder::from_vec(bytes);
        if let Err((status, file_attributes)) = result {
            reply.truncate(start);
            ReadRes::Err(status, file_attributes).encode(reply);
        }
    }

    /// Lays a successful READ3res out after `start` in `bytes`: room for its fixed part (with
    /// attributes, [`READ_HEAD`] bytes), the data read into the room after it, then the fixed
    /// part written against the data's front (without attributes it is shorter, and the data
    /// moves forward over the gap — only when the attributes could not be had).
    fn read_in_place(&self, a: &ReadArgs, bytes: &mut Vec<u8>, start: usize) -> Result<(), (Status, PostOpAttr)> {
        let s = self.server;
        let node = s.node(&a.file).map_err(|status| (status, None))?;
        let count = a.count.min(self.transport.max_data()) as usize;
        let data = start + READ_HEAD;
        bytes.resize(data + count, 0);
        let filled = Memory::lend(&mut bytes[data..], |lent| -> Result<Filled, FsError> {
            s.fs.read_into(node, a.offset, lent.duplicate()?)
        })
        .map_err(FsError::from)
        .and_then(|read| read)
        .map_err(|error| (status(error), s.post(node)))?;
        let len = (filled.bytes as usize).min(count);
        // A short read ended at the end of the file; a full one may have too, which the file's
        // size after the read tells, when it can be had.
        let attributes = s.fs.attributes(node).ok();
        let at_size =
            attributes.as_ref().is_some_and(|attributes| a.offset.saturating_add(len as u64) >= attributes.size);
        let eof = len < count || at_size;
        let mut head = Encoder::new();
        head.u32(Status::Ok as u32);
        attributes.map(|attributes| s.fattr(&attributes)).encode(&mut head);
        head.u32(len as u32);
        head.bool(eof);
        head.u32(len as u32);
        let Some(gap) = READ_HEAD.checked_sub(head.len()) else {
            return Err((Status::ServerFault, None));
        };
        bytes.truncate(data + len);
        bytes.resize(data + len + xdr::padding(len), 0);
        bytes[data - head.len()..data].copy_from_slice(head.as_bytes());
        bytes.drain(start..start + gap);
        Ok(())
    }

    /// WRITE of `data`, which stays in the request.
    fn write(&self, a: &WriteHead, data: &[u8]) -> WriteRes {
        let s = self.server;
        let result = (|| {
            let node = s.node(&a.file)?;
            // The bytes are what counts; a count that disagrees with them is the client's error.
            if a.count as usize != data.len() {
                return Err(Status::Inval);
            }
            let count = a.count;
            let after = s.fs.write(node, a.offset, data).map_err(status)?;
            let committed = match a.stable {
                StableHow::Unstable => StableHow::Unstable,
                StableHow::DataSync | StableHow::FileSync => {
                    s.fs.sync().map_err(status)?;
                    StableHow::FileSync
                }
            };
            Ok(WriteOk {
                file_wcc: WccData { before: None, after: Some(s.fattr(&after)) },
                count,
                committed,
                verf: s.verifier,
            })
        })();
        res(result, WccData::default)
    }

    /// The reply of an operation that made `made` in `dir`.
    fn created(&self, dir: Node, made: &Attributes) -> Answer<CreateOk> {
        let s = self.server;
        s.stable()?;
        Ok(CreateOk { obj: Some(s.handle(made.node)), obj_attributes: Some(s.fattr(made)), dir_wcc: s.wcc_after(dir) })
    }

    /// Gives what a caller made to the caller (as a local file system does), with any other
    /// attributes asked for.
    fn settle(&self, made: Attributes, mut set: Changes) -> Answer<Attributes> {
        let s = self.server;
        if self.caller.uid != made.uid {
            set.uid = Some(self.caller.uid);
        }
        if self.caller.gid != made.gid {
            set.gid = Some(self.caller.gid);
        }
        set.permissions = None;
        if is_empty(&set) {
            return Ok(made);
        }
        s.fs.set_attributes(made.node, set).map_err(status)
    }

    fn create(&self, a: &CreateArgs) -> CreateRes {
        let s = self.server;
        let mut dir_node = None;
        let result = (|| {
            let dir = s.node(&a.place.dir)?;
            dir_node = Some(dir);
            let name = check_name(&a.place.name)?;
            let (set, mode) = match &a.how {
                CreateHow::Unchecked(set) | CreateHow::Guarded(set) => (changes(set), set.mode.unwrap_or(0o644)),
                CreateHow::Exclusive(_) => (Changes::default(), 0o644),
            };
            match s.fs.create(dir, name.to_vec(), (mode & 0o7777) as u16) {
                Ok(made) => {
                    let made = match &a.how {
                        // As Linux: the verifier is kept in the times until the client's SETATTR.
                        CreateHow::Exclusive(verf) => {
                            let [a0, a1, a2, a3, m0, m1, m2, m3] = *verf;
                            let stamp = Changes {
                                atime: Some(fs::SetTime::To(u32::from_be_bytes([a0, a1, a2, a3]))),
                                mtime: Some(fs::SetTime::To(u32::from_be_bytes([m0, m1, m2, m3]))),
                                ..Changes::default()
                            };
                            self.settle(made, stamp)?
                        }
                        _ => self.settle(made, Changes { size: None, ..set })?,
                    };
                    self.created(dir, &made)
                }
                Err(FsError::Exists) => {
                    let there = s.fs.lookup(dir, name.to_vec()).map_err(status)?;
                    match &a.how {
                        CreateHow::Guarded(_) => Err(Status::Exist),
                        CreateHow::Exclusive(verf) => {
                            let [a0, a1, a2, a3, m0, m1, m2, m3] = *verf;
                            let same = there.kind == FileKind::File
                                && there.atime == u32::from_be_bytes([a0, a1, a2, a3])
                                && there.mtime == u32::from_be_bytes([m0, m1, m2, m3]);
                            if same { self.created(dir, &there) } else { Err(Status::Exist) }
                        }
                        CreateHow::Unchecked(_) => {
                            if there.kind != FileKind::File {
                                return Err(Status::Exist);
                            }
                            let there = if is_empty(&set) {
                                there
                            } else {
                                s.fs.set_attributes(there.node, set).map_err(status)?
                            };
                            self.created(dir, &there)
                        }
                    }
                }
                Err(error) => Err(status(error)),
            }
        })();
        res(result, || dir_node.map(|d| s.wcc_after(d)).unwrap_or_default())
    }

    fn mkdir(&self, a: &MkdirArgs) -> CreateRes {
        let s = self.server;
        let mut dir_node = None;
        let result = (|| {
            let dir = s.node(&a.place.dir)?;
            dir_node = Some(dir);
            let name = check_name(&a.place.name)?;
            let mode = a.attributes.mode.unwrap_or(0o755);
            let made = s.fs.mkdir(dir, name.to_vec(), (mode & 0o7777) as u16).map_err(status)?;
            let made = self.settle(made, changes(&a.attributes))?;
            self.created(dir, &made)
        })();
        res(result, || dir_node.map(|d| s.wcc_after(d)).unwrap_or_default())
    }

    fn symlink(&self, a: &SymlinkArgs) -> CreateRes {
        let s = self.server;
        let mut dir_node = None;
        let result = (|| {
            let dir = s.node(&a.place.dir)?;
            dir_node = Some(dir);
            let name = check_name(&a.place.name)?;
            if a.symlink_data.0.is_empty() {
                return Err(Status::Inval);
            }
            let made = s.fs.symlink(dir, name.to_vec(), a.symlink_data.0.clone()).map_err(status)?;
            let made = self.settle(made, Changes::default())?;
            self.created(dir, &made)
        })();
        res(result, || dir_node.map(|d| s.wcc_after(d)).unwrap_or_default())
    }

    fn remove(&self, a: &DirOpArgs, directory: bool) -> RemoveRes {
        let s = self.server;
        let mut dir_node = None;
        let result = (|| {
            let dir = s.node(&a.dir)?;
            dir_node = Some(dir);
            let name = check_name(&a.name)?.to_vec();
            if directory { s.fs.rmdir(dir, name) } else { s.fs.remove(dir, name) }.map_err(status)?;
            s.stable()?;
            Ok(s.wcc_after(dir))
        })();
        res(result, || dir_node.map(|d| s.wcc_after(d)).unwrap_or_default())
    }

    fn rename(&self, a: &RenameArgs) -> RenameRes {
        let s = self.server;
        let result = (|| {
            let from = s.node(&a.from.dir)?;
            let to = s.node(&a.to.dir)?;
            let from_name = check_name(&a.from.name)?.to_vec();
            let to_name = check_name(&a.to.name)?.to_vec();
            s.fs.rename(from, from_name, to, to_name).map_err(status)?;
            s.stable()?;
            Ok(RenameWcc { fromdir_wcc: s.wcc_after(from), todir_wcc: s.wcc_after(to) })
        })();
        res(result, RenameWcc::default)
    }

    fn link(&self, a: &LinkArgs) -> LinkRes {
        let s = self.server;
        let result = (|| {
            let file = s.node(&a.file)?;
            let dir = s.node(&a.link.dir)?;
            let name = check_name(&a.link.name)?.to_vec();
            let after = s.fs.link(file, dir, name).map_err(status)?;
            s.stable()?;
            Ok(LinkWcc { file_attributes: Some(s.fattr(&after)), linkdir_wcc: s.wcc_after(dir) })
        })();
        res(result, LinkWcc::default)
    }

    /// The cookie verifier of a directory: its mtime. A listing resumed with another verifier
    /// is `BadCookie`, as is a cookie the file system calls stale.
    fn cookieverf(attributes: &Attributes) -> [u8; 8] {
        let mut verf = [0; 8];
        verf[4..].copy_from_slice(&attributes.mtime.to_be_bytes());
        verf
    }

    /// The directory's attributes and entries from `cookie`, after the verifier check.
    fn listing(
        &self,
        dir: &FileHandle,
        cookie: u64,
        verf: [u8; 8],
        max: u32,
        plus: bool,
    ) -> Answer<(Attributes, fs::Listing)> {
        let s = self.server;
        let node = s.node(dir)?;
        let attributes = s.attributes(node)?;
        if attributes.kind != FileKind::Directory {
            return Err(Status::NotDir);
        }
        if cookie != 0 && verf != [0; 8] && verf != Self::cookieverf(&attributes) {
            return Err(Status::BadCookie);
        }
        let listing = s.fs.read_directory(node, cookie, max.clamp(1, MAX_ENTRIES), plus).map_err(|e| match e {
            FsError::Stale if cookie != 0 => Status::BadCookie,
            e => status(e),
        })?;
        Ok((attributes, listing))
    }

    fn readdir(&self, a: &ReaddirArgs) -> ReaddirRes {
        let s = self.server;
        let mut dir_attributes = None;
        let result = (|| {
            let count = a.count.min(self.transport.max_listing()) as usize;
            let room = count.saturating_sub(READDIR_OVERHEAD);
            let (attributes, listing) = self.listing(&a.dir, a.cookie, a.cookieverf, (room / 32) as u32, false)?;
            let fattr = s.fattr(&attributes);
            dir_attributes = Some(fattr);
            let mut used = 0;
            let mut entries = Vec::with_capacity(listing.entries.len());
            let total = listing.entries.len();
            for entry in listing.entries {
                let size = 24 + entry.name.len().next_multiple_of(4);
                if used + size > room {
                    break;
                }
                used += size;
                entries.push(Entry { fileid: u64::from(entry.inode), name: Name(entry.name), cookie: entry.cookie });
            }
            if entries.is_empty() && total > 0 {
                return Err(Status::TooSmall);
            }
            let eof = listing.end && entries.len() == total;
            Ok(ReaddirOk { dir_attributes: Some(fattr), cookieverf: Self::cookieverf(&attributes), entries, eof })
        })();
        res(result, || dir_attributes)
    }

    fn readdirplus(&self, a: &ReaddirplusArgs) -> ReaddirplusRes {
        let s = self.server;
        let mut dir_attributes = None;
        let result = (|| {
            let count = a.maxcount.min(self.transport.max_listing()) as usize;
            let room = count.saturating_sub(READDIR_OVERHEAD);
            let (attributes, listing) = self.listing(&a.dir, a.cookie, a.cookieverf, (room / 140) as u32, true)?;
            let fattr = s.fattr(&attributes);
            dir_attributes = Some(fattr);
            let mut used = 0;
            let mut entries = Vec::with_capacity(listing.entries.len());
            let total = listing.entries.len();
            for entry in listing.entries {
                let attributes = entry.attributes.as_ref();
                let size =
                    24 + entry.name.len().next_multiple_of(4) + 4 + 4 + attributes.map_or(0, |_| 84 + 4 + handle::LEN);
                if used + size > room {
                    break;
                }
                used += size;
                entries.push(EntryPlus {
                    fileid: u64::from(entry.inode),
                    name: Name(entry.name),
                    cookie: entry.cookie,
                    name_attributes: attributes.map(|a| s.fattr(a)),
                    name_handle: attributes.map(|a| s.handle(a.node)),
                });
            }
            if entries.is_empty() && total > 0 {
                return Err(Status::TooSmall);
            }
            let eof = listing.end && entries.len() == total;
            Ok(ReaddirplusOk { dir_attributes: Some(fattr), cookieverf: Self::cookieverf(&attributes), entries, eof })
        })();
        res(result, || dir_attributes)
    }

    fn fsstat(&self, a: &FsstatArgs) -> FsstatRes {
        let s = self.server;
        let result = (|| {
            let node = s.node(&a.fsroot)?;
            let usage = s.fs.usage().map_err(status)?;
            let block = u64::from(usage.block_size);
            let free = usage.free_blocks.saturating_mul(block);
            Ok(FsstatOk {
                obj_attributes: s.post(node),
                tbytes: usage.blocks.saturating_mul(block),
                fbytes: free,
                abytes: free,
                tfiles: usage.inodes,
                ffiles: usage.free_inodes,
                afiles: usage.free_inodes,
                invarsec: 0,
            })
        })();
        res(result, || None)
    }

    fn fsinfo(&self, a: &FsinfoArgs) -> FsinfoRes {
        let s = self.server;
        let result = (|| {
            let node = s.node(&a.fsroot)?;
            let attributes = s.attributes(node)?;
            let max = self.transport.max_data();
            Ok(FsinfoOk {
                obj_attributes: Some(s.fattr(&attributes)),
                rtmax: max,
                rtpref: max,
                rtmult: 4096,
                wtmax: max,
                wtpref: max,
                wtmult: 4096,
                dtpref: self.transport.max_listing().min(8192),
                // ext2 with 1 KiB blocks: 16 GiB (the smallest of its limits).
                maxfilesize: 16 << 30,
                time_delta: Time::from_seconds(1),
                properties: fsf::LINK | fsf::SYMLINK | fsf::HOMOGENEOUS | fsf::CANSETTIME,
            })
        })();
        res(result, || None)
    }

    fn pathconf(&self, a: &PathconfArgs) -> PathconfRes {
        let s = self.server;
        let result = (|| {
            let attributes = s.attributes(s.node(&a.object)?)?;
            Ok(PathconfOk {
                obj_attributes: Some(s.fattr(&attributes)),
                linkmax: 32000,
                name_max: NAME_MAX as u32,
                no_trunc: true,
                chown_restricted: true,
                case_insensitive: false,
                case_preserving: true,
            })
        })();
        res(result, || None)
    }

    fn commit(&self, a: &CommitArgs) -> CommitRes {
        let s = self.server;
        let result = (|| {
            let node = s.node(&a.file)?;
            s.attributes(node)?;
            s.fs.sync().map_err(status)?;
            Ok(CommitOk { file_wcc: s.wcc_after(node), verf: s.verifier })
        })();
        res(result, WccData::default)
    }
}
