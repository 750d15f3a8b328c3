//! The ext2 image both servers serve: made by `mke2fs` with the features Domos' ext2 writes
//! (no resize inode, no directory index, no extended attributes), with a directory `bench`
//! holding the 64 MiB file the READ test reads; then copied, so that Domos serves one copy as its
//! disk image and nfs-ganesha the other through a loop mount.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::host::{self, LoopMount};

/// The image's size: the file read, a file written, and room.
pub const IMAGE_BYTES: u64 = 256 << 20;

/// The size of the file read and of the file written.
pub const FILE_BYTES: usize = 64 << 20;

/// The directory under the export's root that holds the bench's files.
pub const DIRECTORY: &str = "bench";

/// The file the READ test reads.
pub const READ_FILE: &str = "read-64m";

/// The two copies and what the read file holds.
pub struct Images {
    /// Domos' disk image.
    pub domos: PathBuf,
    /// nfs-ganesha's copy, to loop-mount.
    pub ganesha: PathBuf,
    /// The bytes of `bench/read-64m`.
    pub data: Vec<u8>,
}

/// Makes the image and its copy in `scratch`.
///
/// # Errors
/// When `mke2fs` is missing or a step fails.
pub fn make(scratch: &Path) -> Result<Images, String> {
    let domos = scratch.join("domos.img");
    let ganesha = scratch.join("ganesha.img");
    let file = std::fs::File::create_new(&domos).map_err(|e| format!("cannot create {}: {e}", domos.display()))?;
    file.set_len(IMAGE_BYTES).map_err(|e| format!("{}: {e}", domos.display()))?;
    drop(file);
    let mke2fs = host::tool("mke2fs", "e2fsprogs")?;
    let image = domos.to_string_lossy().into_owned();
    let features = "^resize_inode,^dir_index,^ext_attr";
    host::run(&mke2fs, &["-q", "-F", "-t", "ext2", "-b", "4096", "-m", "0", "-O", features, &image])?;
    let mut random = domos_grafts::Xorshift::new(0x6e66_7333);
    let data: Vec<u8> = (0..FILE_BYTES / 8).flat_map(|_| random.next_u64().to_le_bytes()).collect();
    let point = scratch.join("populate");
    std::fs::create_dir(&point).map_err(|e| format!("cannot create {}: {e}", point.display()))?;
    {
        let mount = LoopMount::new(&domos, &point)?;
        let dir = mount.point().join(DIRECTORY);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join(READ_FILE);
        let mut file = std::fs::File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        file.write_all(&data).and_then(|()| file.sync_all()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    std::fs::remove_dir(&point).map_err(|e| format!("cannot remove {}: {e}", point.display()))?;
    std::fs::copy(&domos, &ganesha).map_err(|e| format!("cannot copy the image: {e}"))?;
    Ok(Images { domos, ganesha, data })
}
