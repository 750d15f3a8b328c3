//! The data path without repeated work: open files (`OpenFile`), and reads by node that keep
//! each file's block map between calls.
//!
//! A read by path used to look the path up, load the inode three times and walk the block map
//! on every call, each step a buffer-cache call (about seven per 4 KiB record). Here the work
//! that does not change between two reads is done once:
//!
//! - **The path** is looked up when the file is opened (`FileSystem::open`); the open file
//!   names its node (inode number and generation), as an NFS file handle does.
//! - **The inode and the block map** are read when the file is opened and kept per inode in
//!   [`FileMaps`]: the file's size and its extents over a window of the file, valid while the
//!   file system's count of layout changes (`Ext2::layout_changes`: a block allocated or freed,
//!   a size set, in any file) is the one they were read at. So a map never outlives a write that
//!   grows a file, a truncate or a remove, while a write over a file's own blocks (iozone's
//!   rewrite) or a rename keeps it.
//! - **The cached blocks** are read through the device's kept views of the cache's memory
//!   (`CacheDevice`): a read copies its blocks from the cache's memory into the caller's memory
//!   object with one host call for up to 32 of them (`Memory::gather`) and no call to the cache
//!   at all.
//!
//! A read whose map is kept and whose blocks all have kept views changes nothing, and runs under
//! the service's lock taken to read (`RwLock::read`), beside other such reads (the NFS server's
//! workers, `drv-fuse`'s threads, any client's threads; decision 0020). Any other read, and
//! everything else the service does, takes the lock alone; a read that finds something missing lets go and starts
//! again that way. So no block a read copies can be freed and given to another file meanwhile,
//! and no call to the cache (which may evict a block and revoke its view) runs beside a read.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use domos_ext2::{BlockDevice, Extent};
use domos_interfaces::file_system::{Filled, FsError, OpenFile};
use domos_interfaces::inode_file_system::Node;
use domos_sdk::{Memory, Mutex, Portal};

use crate::{Ext2, Ext2Service, MAX_READ, Mounted, ZEROS, fs_error};

/// The most bytes of a file one map covers: a reader reading on maps the next window.
const WINDOW: u64 = 8 << 20;

/// The most files whose maps are kept; past it the maps are dropped and read again.
const MAX_MAPS: usize = 64;

/// One file's map: its size and where a window of its bytes lies on the device.
struct FileMap {
    generation: u32,
    /// The file system's count of layout changes when the map was read.
    layout: u64,
    size: u64,
    /// The window `[start, end)` the extents cover, in file order.
    start: u64,
    end: u64,
    extents: Vec<Extent>,
}

impl FileMap {
    /// Its extents over `[offset, offset + len)`, clipped to the file.
    fn clipped(&self, offset: u64, len: u64) -> impl Iterator<Item = Extent> + '_ {
        let end = offset.saturating_add(len).min(self.size);
        self.extents.iter().filter_map(move |extent| {
            let (from, to) = (extent.offset.max(offset), (extent.offset + extent.len).min(end));
            let device_offset = extent.device_offset.map(|device| device + (from - extent.offset));
            (from < to).then_some(Extent { offset: from, len: to - from, device_offset })
        })
    }
}

/// The kept maps, behind the service's lock (in [`Mounted`]).
#[derive(Default)]
pub(crate) struct FileMaps {
    maps: BTreeMap<u32, FileMap>,
}

impl FileMaps {
    /// The kept map of file `node` covering `[offset, offset + len)` (clipped to the file), if
    /// one is kept that was read at the file system's count of layout changes `layout`.
    fn kept(&self, layout: u64, node: Node, offset: u64, len: u64) -> Option<&FileMap> {
        let map = self.maps.get(&node.inode).filter(|map| map.layout == layout && map.generation == node.generation)?;
        let end = offset.saturating_add(len).min(map.size);
        (offset >= map.size || (map.start <= offset && end <= map.end)).then_some(map)
    }
}

impl Ext2Service {
    /// The kept map of file `node` covering `[offset, offset + len)` (clipped to the file), or,
    /// when that is stale or does not cover them, one read anew.
    fn map_of<'m>(
        maps: &'m mut FileMaps,
        fs: &mut Ext2,
        node: Node,
        offset: u64,
        len: u64,
    ) -> Result<&'m FileMap, FsError> {
        let layout = fs.layout_changes();
        if maps.kept(layout, node, offset, len).is_none() {
            let window = len.max(WINDOW);
            let Some((size, extents)) =
                fs.find_extents(node.inode, node.generation, offset, window).map_err(fs_error)?
            else {
                return Err(FsError::Stale);
            };
            let end = offset.saturating_add(window).min(size).max(offset);
            if maps.maps.len() >= MAX_MAPS {
                maps.maps.clear();
            }
            let map = FileMap { generation: node.generation, layout, size, start: offset, end, extents };
            maps.maps.insert(node.inode, map);
        }
        maps.maps.get(&node.inode).ok_or(FsError::Stale)
    }

    /// A portal to regular file `node`, opened: its map is read now, so that the first read
    /// finds it (a node that is gone, of another generation or no regular file fails here).
    pub(crate) fn open_node(&self, node: Node) -> Result<Portal<dyn OpenFile>, FsError> {
        let mut guard = self.mounted()?;
        let Mounted { fs, maps, .. } = &mut *guard;
        Self::map_of(maps, fs, node, 0, 0)?;
        drop(guard);
        let service = self.me.upgrade().ok_or(FsError::Stale)?;
        let opened: Arc<dyn OpenFile> = Arc::new(Opened { service, node, attached: Mutex::new(None) });
        Ok(Portal::new(opened))
    }

    /// Reads file `node` from `offset` into `memory`: the fast path of every read.
    pub(crate) fn read_node_into(&self, node: Node, offset: u64, memory: &Memory) -> Result<Filled, FsError> {
        self.read_node_into_room(node, offset, memory, memory.len()?)
    }

    /// As [`Self::read_node_into`], at most `room` bytes (which `memory` must hold).
    ///
    /// A read whose map is kept and whose blocks all have kept views changes nothing: it runs
    /// under the shared lock, beside other such reads. Any other read is made again from its
    /// start under the exclusive lock, which reads the map and asks the cache for views.
    fn read_node_into_room(&self, node: Node, offset: u64, memory: &Memory, room: u64) -> Result<Filled, FsError> {
        let room = room.min(MAX_READ);
        {
            let shared = self.mounted_shared()?;
            let Mounted { fs, maps, .. } = &*shared;
            if let Some(map) = maps.kept(fs.layout_changes(), node, offset, room) {
                let device = fs.device();
                let filled = Self::fill(map, offset, room, memory, |at, from, len| {
                    // The cache's failure was said on the console.
                    Ok(device.copy_kept(memory, at, from, len).map_err(|_| FsError::Io)? == len)
                })?;
                if let Some(filled) = filled {
                    return Ok(filled);
                }
            }
        }
        let mut guard = self.mounted()?;
        let Mounted { fs, maps, .. } = &mut *guard;
        let map = Self::map_of(maps, fs, node, offset, room)?;
        let device = fs.device_mut();
        let filled = Self::fill(map, offset, room, memory, |at, from, len| {
            device.copy_into(memory, at, from, len).map_err(|_| FsError::Io)?;
            Ok(true)
        })?;
        filled.ok_or(FsError::Io)
    }

    /// Fills `memory` with up to `room` bytes of the file `map` maps from `offset`: its data
    /// by `copy(at, device, len)`, which says whether it copied them all, its holes with zeros.
    /// `None` when a copy fell short.
    fn fill(
        map: &FileMap,
        offset: u64,
        room: u64,
        memory: &Memory,
        mut copy: impl FnMut(u64, u64, u64) -> Result<bool, FsError>,
    ) -> Result<Option<Filled>, FsError> {
        let mut filled = Filled { bytes: 0, hole: true };
        for extent in map.clipped(offset, room) {
            let at = extent.offset - offset;
            match extent.device_offset {
                Some(device) => {
                    if !copy(at, device, extent.len)? {
                        return Ok(None);
                    }
                    filled.hole = false;
                }
                None => {
                    // A hole reads as zeros, which the memory may not hold.
                    let zeros = vec![0; extent.len.min(ZEROS) as usize];
                    let mut done = 0;
                    while done < extent.len {
                        let n = (extent.len - done).min(ZEROS) as usize;
                        memory.write(at + done, &zeros[..n])?;
                        done += n as u64;
                    }
                }
            }
            filled.bytes += extent.len;
        }
        Ok(Some(filled))
    }

    /// Reads up to `len` bytes of file `node` from `offset` into a vector, through the same
    /// maps and views (each block copied from the cache's memory into this heap once), and
    /// under the shared lock when they are kept, as [`Self::read_node_into_room`] does.
    pub(crate) fn read_node(&self, node: Node, offset: u64, len: u32) -> Result<(Vec<u8>, u64), FsError> {
        let len = u64::from(len).min(MAX_READ);
        {
            let shared = self.mounted_shared()?;
            let Mounted { fs, maps, .. } = &*shared;
            if let Some(map) = maps.kept(fs.layout_changes(), node, offset, len) {
                let device = fs.device();
                if let Some(read) = Self::collect(map, offset, len, |from, out| Ok(device.read_kept(from, out)))? {
                    return Ok(read);
                }
            }
        }
        let mut guard = self.mounted()?;
        let Mounted { fs, maps, .. } = &mut *guard;
        let map = Self::map_of(maps, fs, node, offset, len)?;
        let device = fs.device_mut();
        let read = Self::collect(map, offset, len, |from, out| {
            device.read(from, out).map_err(|_| FsError::Io)?;
            Ok(true)
        })?;
        read.ok_or(FsError::Io)
    }

    /// Up to `len` bytes of the file `map` maps from `offset`, its data read by `read(device,
    /// out)`, which says whether it read them all, and the file's size. `None` when a read fell
    /// short.
    fn collect(
        map: &FileMap,
        offset: u64,
        len: u64,
        mut read: impl FnMut(u64, &mut [u8]) -> Result<bool, FsError>,
    ) -> Result<Option<(Vec<u8>, u64)>, FsError> {
        let total: u64 = map.clipped(offset, len).map(|extent| extent.len).sum();
        let mut data = vec![0; total as usize];
        for extent in map.clipped(offset, len) {
            let at = (extent.offset - offset) as usize;
            if let Some(device) = extent.device_offset {
                let out = data.get_mut(at..at + extent.len as usize).ok_or(FsError::Io)?;
                if !read(device, out)? {
                    return Ok(None);
                }
            }
        }
        Ok(Some((data, map.size)))
    }
}

/// An open regular file: the service and the node it names.
pub(crate) struct Opened {
    pub(crate) service: Arc<Ext2Service>,
    pub(crate) node: Node,
    /// The buffer of `read_attached`, and its length.
    attached: Mutex<Option<(Memory, u64)>>,
}

impl OpenFile for Opened {
    fn size(&self) -> Result<u64, FsError> {
        let mut guard = self.service.mounted()?;
        let Mounted { fs, maps, .. } = &mut *guard;
        Ext2Service::map_of(maps, fs, self.node, 0, 0).map(|map| map.size)
    }

    fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, FsError> {
        self.service.read_node(self.node, offset, len).map(|(data, _)| data)
    }

    fn read_into(&self, offset: u64, memory: Memory) -> Result<Filled, FsError> {
        self.service.read_node_into(self.node, offset, &memory)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), FsError> {
        let node = self.node;
        self.service.with(|fs| {
            match fs.find_inode(node.inode)? {
                Some(metadata) if metadata.generation == node.generation => {}
                _ => return Err(domos_ext2::Error::Stale),
            }
            fs.write(node.inode, offset, data)
        })
    }

    fn attach(&self, memory: Memory) -> Result<(), FsError> {
        let len = memory.len()?;
        *self.attached.lock() = Some((memory, len));
        Ok(())
    }

    fn read_attached(&self, offset: u64, len: u32) -> Result<Filled, FsError> {
        let attached = crate::lock(&self.attached)?;
        let (memory, room) =
            attached.as_ref().ok_or_else(|| FsError::Invalid(String::from("no buffer attached to read into")))?;
        self.service.read_node_into_room(self.node, offset, memory, u64::from(len).min(*room))
    }
}
