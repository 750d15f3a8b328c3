//! Access to guests' linear memories from the kernel: every `unsafe` memory access of the
//! kernel is in this module.
//!
//! A component's heap is a wasm *shared* memory that the threads of the domain may write at any
//! time (or, in an interpreted domain, a fixed-size memory that never moves), so the kernel never
//! forms Rust references to its bytes: it copies with raw pointers after checking bounds against
//! the memory's current size. A guest racing with such a copy can only garble its own message,
//! which the receiver validates like any other input.

use domos_abi::HostError;

use crate::domain::Heap;

/// The current base and length of `memory`.
fn bounds(memory: &Heap) -> (*mut u8, usize) {
    match memory {
        Heap::Shared(shared) => {
            let data = shared.data();
            (data.as_ptr() as *mut u8, data.len())
        }
        Heap::Single(single) => single.bounds(),
    }
}

/// The address range `[addr, addr + len)` if it lies inside a memory of `size` bytes.
fn checked(addr: u32, len: usize, size: usize) -> Result<usize, HostError> {
    let start = addr as usize;
    match start.checked_add(len) {
        Some(end) if end <= size => Ok(start),
        _ => Err(HostError::InvalidArgument),
    }
}

/// Copies `out.len()` bytes at `addr` of `memory` into `out`.
///
/// # Errors
/// `InvalidArgument` when the range is outside the memory.
pub fn read(memory: &Heap, addr: u32, out: &mut [u8]) -> Result<(), HostError> {
    let (base, size) = bounds(memory);
    let start = checked(addr, out.len(), size)?;
    // SAFETY: `start + out.len() <= size`, the memory's current length; neither kind of heap
    // ever shrinks or moves (shared memories by wasm's rules, single heaps because they are
    // created at their full size), so the range stays mapped for the copy. No reference to guest
    // bytes is made.
    unsafe { std::ptr::copy_nonoverlapping(base.add(start), out.as_mut_ptr(), out.len()) };
    Ok(())
}

/// Copies `bytes` into `memory` at `addr`.
///
/// # Errors
/// `InvalidArgument` when the range is outside the memory.
pub fn write(memory: &Heap, addr: u32, bytes: &[u8]) -> Result<(), HostError> {
    let (base, size) = bounds(memory);
    let start = checked(addr, bytes.len(), size)?;
    // SAFETY: as in `read`, the checked range is mapped and no reference to it exists.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(start), bytes.len()) };
    Ok(())
}

/// Copies `len` bytes from `src` at `src_addr` to `dst` at `dst_addr`: the one copy of a
/// portal message from the caller's heap into the callee's.
///
/// # Errors
/// `InvalidArgument` when either range is outside its memory.
pub fn copy(src: &Heap, src_addr: u32, dst: &Heap, dst_addr: u32, len: usize) -> Result<(), HostError> {
    let (src_base, src_size) = bounds(src);
    let (dst_base, dst_size) = bounds(dst);
    let from = checked(src_addr, len, src_size)?;
    let to = checked(dst_addr, len, dst_size)?;
    // SAFETY: both ranges are checked against their memories' current lengths; `copy` (memmove)
    // is used because a same-memory copy may overlap.
    unsafe { std::ptr::copy(src_base.add(from), dst_base.add(to), len) };
    Ok(())
}

/// Reads the little-endian `u32` at `addr`.
///
/// # Errors
/// `InvalidArgument` when it lies outside the memory.
pub fn read_u32(memory: &Heap, addr: u32) -> Result<u32, HostError> {
    let mut bytes = [0u8; 4];
    read(memory, addr, &mut bytes)?;
    Ok(u32::from_le_bytes(bytes))
}

/// Writes a little-endian `u32` at `addr`.
///
/// # Errors
/// `InvalidArgument` when it lies outside the memory.
pub fn write_u32(memory: &Heap, addr: u32, value: u32) -> Result<(), HostError> {
    write(memory, addr, &value.to_le_bytes())
}

/// Reads a UTF-8 string of at most `max` bytes.
///
/// # Errors
/// `InvalidArgument` for a range outside the memory or a string over `max`;
/// `MalformedMessage` for bad UTF-8.
pub fn read_str(memory: &Heap, addr: u32, len: u32, max: usize) -> Result<String, HostError> {
    if len as usize > max {
        return Err(HostError::InvalidArgument);
    }
    let mut bytes = vec![0u8; len as usize];
    read(memory, addr, &mut bytes)?;
    String::from_utf8(bytes).map_err(|_| HostError::MalformedMessage)
}
