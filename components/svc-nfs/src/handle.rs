//! The file handle: 16 bytes, fixed — a magic and format version, the file system's id, the
//! inode number and the inode's generation (decision 0008). It names a node by what lasts on
//! the disk, so it stays valid across a restart of the server until the file is removed, and a
//! reused inode (a new generation) makes an old handle stale, never another file's.

use domos_interfaces::inode_file_system::Node;
use domos_nfs::nfs3::{FileHandle, Status};

/// The handle's length.
pub const LEN: usize = 16;
/// The first bytes: `DN` (Domos NFS), format 1, reserved 0.
const MAGIC: [u8; 4] = [b'D', b'N', 1, 0];

/// The handle of `node` in file system `fsid`.
pub fn encode(fsid: u32, node: Node) -> FileHandle {
    let mut bytes = [0; LEN];
    bytes[..4].copy_from_slice(&MAGIC);
    bytes[4..8].copy_from_slice(&fsid.to_be_bytes());
    bytes[8..12].copy_from_slice(&node.inode.to_be_bytes());
    bytes[12..16].copy_from_slice(&node.generation.to_be_bytes());
    FileHandle::new(&bytes).expect("16 bytes fit a file handle")
}

/// The node a handle names: `BadHandle` for a handle this server never made (wrong length or
/// magic), `Stale` for one of another file system. Whether the node still exists is the file
/// system's to say (`FsError::Stale`).
pub fn decode(fsid: u32, handle: &FileHandle) -> Result<Node, Status> {
    let bytes = handle.as_bytes();
    if bytes.len() != LEN || bytes[..4] != MAGIC {
        return Err(Status::BadHandle);
    }
    let word = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    if word(4) != fsid {
        return Err(Status::Stale);
    }
    Ok(Node { inode: word(8), generation: word(12) })
}
