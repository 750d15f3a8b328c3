//! The disk under the file system: byte-addressed reads and writes.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Why a block device refused a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoError {
    /// The transfer reaches past the end of the device.
    OutOfRange {
        /// First byte of the transfer.
        offset: u64,
        /// Length of the transfer in bytes.
        len: u64,
    },
    /// The device reported a failure at this byte offset.
    Device {
        /// First byte of the failed transfer.
        offset: u64,
    },
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoError::OutOfRange { offset, len } => write!(f, "{len} bytes at offset {offset} lie past the device end"),
            IoError::Device { offset } => write!(f, "transfer at offset {offset} failed"),
        }
    }
}

/// A disk the file system reads and writes by byte offset.
///
/// The file system only issues transfers of whole blocks or parts of one block, at offsets it
/// computed from the superblock, so an implementation over a buffer cache can serve them from
/// cached blocks.
pub trait BlockDevice {
    /// Fills `buf` with the bytes at `offset`.
    ///
    /// # Errors
    /// [`IoError`] when the range lies past the end or the device fails.
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IoError>;

    /// Writes `buf` at `offset`.
    ///
    /// # Errors
    /// [`IoError`] when the range lies past the end or the device fails.
    fn write(&mut self, offset: u64, buf: &[u8]) -> Result<(), IoError>;

    /// The size of the device in bytes.
    fn size(&self) -> u64;

    /// Makes every earlier write durable.
    ///
    /// # Errors
    /// [`IoError`] when the device fails.
    fn flush(&mut self) -> Result<(), IoError>;

    /// Makes the earlier writes of the `len` bytes at `offset` durable, at least: they reach
    /// the disk before any later write. A device that cannot single them out makes every
    /// earlier write durable, as [`flush`](Self::flush) does (the default).
    ///
    /// # Errors
    /// [`IoError`] when the device fails.
    fn flush_range(&mut self, offset: u64, len: u64) -> Result<(), IoError> {
        let _ = (offset, len);
        self.flush()
    }
}

impl<T: BlockDevice + ?Sized> BlockDevice for &mut T {
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        (**self).read(offset, buf)
    }

    fn write(&mut self, offset: u64, buf: &[u8]) -> Result<(), IoError> {
        (**self).write(offset, buf)
    }

    fn size(&self) -> u64 {
        (**self).size()
    }

    fn flush(&mut self) -> Result<(), IoError> {
        (**self).flush()
    }

    fn flush_range(&mut self, offset: u64, len: u64) -> Result<(), IoError> {
        (**self).flush_range(offset, len)
    }
}

/// A block device held in memory, for tests and RAM disks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryDevice {
    data: Vec<u8>,
}

impl MemoryDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: usize) -> Self {
        MemoryDevice { data: vec![0; size] }
    }

    /// A device holding `data` (an image).
    pub fn from_vec(data: Vec<u8>) -> Self {
        MemoryDevice { data }
    }

    /// The bytes of the device.
    pub fn as_slice(&self) -> &[u8] {
        &self.data
    }

    /// The bytes of the device, to change them behind the file system's back (tests).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// The image, giving up the device.
    pub fn into_vec(self) -> Vec<u8> {
        self.data
    }

    fn range(&self, offset: u64, len: usize) -> Result<core::ops::Range<usize>, IoError> {
        let out_of_range = IoError::OutOfRange { offset, len: len as u64 };
        let start = usize::try_from(offset).map_err(|_| out_of_range)?;
        let end = start.checked_add(len).ok_or(out_of_range)?;
        if end > self.data.len() {
            return Err(out_of_range);
        }
        Ok(start..end)
    }
}

impl BlockDevice for MemoryDevice {
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let range = self.range(offset, buf.len())?;
        buf.copy_from_slice(self.data.get(range).ok_or(IoError::OutOfRange { offset, len: buf.len() as u64 })?);
        Ok(())
    }

    fn write(&mut self, offset: u64, buf: &[u8]) -> Result<(), IoError> {
        let range = self.range(offset, buf.len())?;
        self.data.get_mut(range).ok_or(IoError::OutOfRange { offset, len: buf.len() as u64 })?.copy_from_slice(buf);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.data.len() as u64
    }

    fn flush(&mut self) -> Result<(), IoError> {
        Ok(())
    }
}
