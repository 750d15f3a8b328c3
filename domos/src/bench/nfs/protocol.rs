//! The load generator's calls and the checks of their replies, on `domos-nfs` (the same codec
//! Domos' server decodes them with): rpcbind GETPORT, MOUNT, and the NFSv3 procedures the bench
//! uses. Calls carry AUTH_SYS as root (both servers export with no squashing). A reply is good
//! only when RPC accepted it with SUCCESS and NFS answered NFS3_OK; anything else is an error
//! that names what came back.

use domos_nfs::mount::{self, DirPath, MountResult};
use domos_nfs::nfs3::{
    self, CommitArgs, CommitRes, CreateArgs, CreateHow, CreateRes, DirOpArgs, FileHandle, FsinfoArgs, FsinfoRes,
    GetattrArgs, GetattrRes, LookupArgs, LookupRes, ReadArgs, ReadRes, RemoveRes, Res, Sattr3, StableHow, WriteArgs,
    WriteHead, WriteRes,
};
use domos_nfs::portmap::{self, Mapping};
use domos_nfs::rpc::{self, AuthSys, Message, OpaqueAuth, ReplyStatus};
use domos_nfs::xdr::{Decoder, Encoder, Xdr};

use super::client::Transport;

/// A file handle.
pub type Handle = FileHandle;

/// rpcbind's port.
pub const RPCBIND_PORT: u16 = portmap::PORT;
/// NFS's program number.
pub const NFS_PROGRAM: u32 = nfs3::PROGRAM;
/// MOUNT's program number.
pub const MOUNT_PROGRAM: u32 = mount::PROGRAM;
/// The path Domos' server exports (the root of its file system).
pub const DOMOS_EXPORT: &str = "/";

/// The AUTH_SYS credential of root on the bench's machine, encoded once per thread.
fn credential() -> &'static [u8] {
    use std::sync::OnceLock;
    static BODY: OnceLock<Vec<u8>> = OnceLock::new();
    BODY.get_or_init(|| {
        AuthSys { stamp: 0, machine_name: "domos-bench".into(), uid: 0, gid: 0, gids: Vec::new() }.to_xdr()
    })
}

/// A call to `program` `version` `procedure` with `args`.
fn call(xid: u32, program: u32, version: u32, procedure: u32, args: &dyn Fn(&mut Encoder)) -> Vec<u8> {
    let mut e = Encoder::new();
    let auth = OpaqueAuth { flavor: rpc::flavor::AUTH_SYS, body: credential() };
    rpc::encode_call(&mut e, xid, program, version, procedure, &auth);
    args(&mut e);
    e.into_vec()
}

/// An NFSv3 call.
fn nfs(xid: u32, procedure: u32, args: &dyn Fn(&mut Encoder)) -> Vec<u8> {
    call(xid, nfs3::PROGRAM, nfs3::VERSION, procedure, args)
}

/// The results of an accepted, successful reply, still to decode.
fn results(reply: &[u8]) -> Result<Decoder<'_>, String> {
    let mut d = Decoder::new(reply);
    match Message::decode(&mut d).map_err(|e| format!("a malformed reply ({e:?})"))? {
        Message::Reply(header) if header.status == ReplyStatus::Success => Ok(d),
        Message::Reply(header) => Err(format!("the call was not accepted: {:?}", header.status)),
        Message::Call(_) => Err("a call instead of a reply".into()),
    }
}

/// Decodes a whole `T` from a successful reply.
fn decode<T: Xdr>(reply: &[u8]) -> Result<T, String> {
    let mut d = results(reply)?;
    let value = T::decode(&mut d).map_err(|e| format!("malformed results ({e:?})"))?;
    d.finish().map_err(|e| format!("bytes after the results ({e:?})"))?;
    Ok(value)
}

/// The success arm of an NFS result, or its status as the error.
fn ok<T, F>(res: Res<T, F>) -> Result<T, String> {
    match res {
        Res::Ok(ok) => Ok(ok),
        Res::Err(status, _) => Err(format!("{status:?}")),
    }
}

/// rpcbind GETPORT for `program` `version` over `transport`.
pub fn getport(xid: u32, program: u32, version: u32, transport: Transport) -> Vec<u8> {
    let protocol = match transport {
        Transport::Udp => portmap::IPPROTO_UDP,
        Transport::Tcp => portmap::IPPROTO_TCP,
    };
    let mapping = Mapping { program, version, protocol, port: 0 };
    call(xid, portmap::PROGRAM, portmap::VERSION, portmap::procedure::GETPORT, &|e| mapping.encode(e))
}

/// GETPORT's port (0: not registered).
///
/// # Errors
/// A reply that is not a successful GETPORT result.
pub fn getport_reply(reply: &[u8]) -> Result<u16, String> {
    let port: u32 = decode::<U32>(reply)?.0;
    u16::try_from(port).map_err(|_| format!("port {port} out of range"))
}

/// MOUNT's MNT of `path`.
pub fn mount(xid: u32, path: &str) -> Vec<u8> {
    let path = DirPath(path.as_bytes().to_vec());
    call(xid, mount::PROGRAM, mount::VERSION, mount::procedure::MNT, &|e| path.encode(e))
}

/// The root handle MNT returned.
///
/// # Errors
/// A refusal, with its status.
pub fn mount_reply(reply: &[u8]) -> Result<Handle, String> {
    match decode::<MountResult>(reply)? {
        MountResult::Ok { handle, .. } => Ok(handle),
        MountResult::Err(status) => Err(format!("{status:?}")),
    }
}

/// NFS NULL.
pub fn null(xid: u32) -> Vec<u8> {
    nfs(xid, nfs3::procedure::NULL, &|_| {})
}

/// Checks NULL's (empty) reply.
///
/// # Errors
/// A reply that is not an accepted, empty success.
pub fn null_reply(reply: &[u8]) -> Result<(), String> {
    decode::<()>(reply)
}

/// GETATTR of `object`.
pub fn getattr(xid: u32, object: &Handle) -> Vec<u8> {
    let args = GetattrArgs { object: *object };
    nfs(xid, nfs3::procedure::GETATTR, &|e| args.encode(e))
}

/// Checks a GETATTR reply: NFS3_OK and whole attributes.
///
/// # Errors
/// Anything else.
pub fn getattr_reply(reply: &[u8]) -> Result<(), String> {
    ok(decode::<GetattrRes>(reply)?).map(drop)
}

/// LOOKUP of `name` in `dir`.
pub fn lookup(xid: u32, dir: &Handle, name: &str) -> Vec<u8> {
    let args = LookupArgs { what: DirOpArgs { dir: *dir, name: name.into() } };
    nfs(xid, nfs3::procedure::LOOKUP, &|e| args.encode(e))
}

/// The handle LOOKUP found.
///
/// # Errors
/// A failed LOOKUP, with its status.
pub fn lookup_reply(reply: &[u8]) -> Result<Handle, String> {
    ok(decode::<LookupRes>(reply)?).map(|found| found.object)
}

/// FSINFO of the file system of `root`.
pub fn fsinfo(xid: u32, root: &Handle) -> Vec<u8> {
    let args = FsinfoArgs { fsroot: *root };
    nfs(xid, nfs3::procedure::FSINFO, &|e| args.encode(e))
}

/// FSINFO's largest READ and WRITE.
///
/// # Errors
/// A failed FSINFO.
pub fn fsinfo_reply(reply: &[u8]) -> Result<(u32, u32), String> {
    ok(decode::<FsinfoRes>(reply)?).map(|info| (info.rtmax, info.wtmax))
}

/// READ of `count` bytes of `file` at `offset`.
pub fn read(xid: u32, file: &Handle, offset: u64, count: u32) -> Vec<u8> {
    let args = ReadArgs { file: *file, offset, count };
    nfs(xid, nfs3::procedure::READ, &|e| args.encode(e))
}

/// The bytes READ returned.
///
/// # Errors
/// A failed READ, or a count that disagrees with the data.
pub fn read_reply(reply: &[u8]) -> Result<Vec<u8>, String> {
    let read = ok(decode::<ReadRes>(reply)?)?;
    if read.count as usize != read.data.len() {
        return Err(format!("READ says {} bytes and carries {}", read.count, read.data.len()));
    }
    Ok(read.data)
}

/// CREATE of `name` in `dir` (UNCHECKED, mode 0644).
pub fn create(xid: u32, dir: &Handle, name: &str) -> Vec<u8> {
    let attributes = Sattr3 { mode: Some(0o644), ..Sattr3::default() };
    let args = CreateArgs { place: DirOpArgs { dir: *dir, name: name.into() }, how: CreateHow::Unchecked(attributes) };
    nfs(xid, nfs3::procedure::CREATE, &|e| args.encode(e))
}

/// The handle of the file CREATE made.
///
/// # Errors
/// A failed CREATE, or one that returned no handle (the bench does not LOOKUP it then).
pub fn create_reply(reply: &[u8]) -> Result<Handle, String> {
    ok(decode::<CreateRes>(reply)?)?.obj.ok_or_else(|| "CREATE returned no file handle".to_string())
}

/// WRITE of `data` into `file` at `offset`, UNSTABLE (COMMIT follows).
pub fn write(xid: u32, file: &Handle, offset: u64, data: &[u8]) -> Vec<u8> {
    let head = WriteHead { file: *file, offset, count: data.len() as u32, stable: StableHow::Unstable };
    let args = WriteArgs { head, data: data.to_vec() };
    nfs(xid, nfs3::procedure::WRITE, &|e| args.encode(e))
}

/// The bytes WRITE took.
///
/// # Errors
/// A failed WRITE.
pub fn write_reply(reply: &[u8]) -> Result<u64, String> {
    ok(decode::<WriteRes>(reply)?).map(|written| u64::from(written.count))
}

/// COMMIT of the whole of `file`.
pub fn commit(xid: u32, file: &Handle) -> Vec<u8> {
    let args = CommitArgs { file: *file, offset: 0, count: 0 };
    nfs(xid, nfs3::procedure::COMMIT, &|e| args.encode(e))
}

/// Checks a COMMIT reply.
///
/// # Errors
/// A failed COMMIT.
pub fn commit_reply(reply: &[u8]) -> Result<(), String> {
    ok(decode::<CommitRes>(reply)?).map(drop)
}

/// REMOVE of `name` in `dir`.
pub fn remove(xid: u32, dir: &Handle, name: &str) -> Vec<u8> {
    let args = DirOpArgs { dir: *dir, name: name.into() };
    nfs(xid, nfs3::procedure::REMOVE, &|e| args.encode(e))
}

/// Checks a REMOVE reply.
///
/// # Errors
/// A failed REMOVE.
pub fn remove_reply(reply: &[u8]) -> Result<(), String> {
    ok(decode::<RemoveRes>(reply)?).map(drop)
}

/// GETPORT's result, an unsigned integer.
struct U32(u32);

impl Xdr for U32 {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.0);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self, domos_nfs::xdr::XdrError> {
        d.u32().map(U32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calls decode as the server decodes them, and replies made with the same codec check.
    #[test]
    fn calls_decode_as_a_server_sees_them_and_replies_check() {
        let file = FileHandle::new(&[7; 12]).unwrap();
        let call = getattr(42, &file);
        let mut d = Decoder::new(&call);
        let Ok(Message::Call(header)) = Message::decode(&mut d) else { panic!("not a call") };
        assert_eq!((header.xid, header.program, header.procedure), (42, nfs3::PROGRAM, nfs3::procedure::GETATTR));
        assert_eq!(header.credential.caller().map(|c| c.uid), Some(0), "AUTH_SYS as root");
        assert_eq!(GetattrArgs::decode(&mut d).unwrap().object, file);

        let mut reply = Encoder::new();
        rpc::encode_reply(&mut reply, 42, &ReplyStatus::Success);
        GetattrRes::Err(nfs3::Status::Stale, ()).encode(&mut reply);
        assert_eq!(getattr_reply(reply.as_bytes()), Err("Stale".to_string()));

        let mut refused = Encoder::new();
        rpc::encode_reply(&mut refused, 43, &ReplyStatus::ProcedureUnavailable);
        assert!(null_reply(refused.as_bytes()).unwrap_err().contains("ProcedureUnavailable"));

        let mut port = Encoder::new();
        rpc::encode_reply(&mut port, 44, &ReplyStatus::Success);
        port.u32(2049);
        assert_eq!(getport_reply(port.as_bytes()), Ok(2049));
    }
}
