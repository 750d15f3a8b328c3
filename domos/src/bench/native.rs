//! The paper's baseline: the three grafts in C (`grafts/c/`, compiled with `-O2` by `build.rs`),
//! behind safe wrappers.
//!
//! Each C function is the same algorithm, on the same data layout, as its Rust counterpart in
//! `domos-grafts`, and takes the inputs the Rust crate makes; the tests below check that both
//! give bit-identical checksums.

unsafe extern "C" {
    /// `grafts/c/page_eviction.c`: reads `inputs[..len]`, allocates and frees its own memory.
    fn graft_page_eviction(inputs: *const u32, len: usize, searches: usize) -> u64;
    /// `grafts/c/md5.c`: reads `data[..len]`, writes the 16 bytes at `digest`.
    fn graft_md5(data: *const u8, len: usize, digest: *mut u8);
    /// `grafts/c/logical_disk.c`: reads `inputs[..len]`, allocates and frees its own memory.
    fn graft_logical_disk(inputs: *const u32, len: usize) -> u64;
}

/// `searches` page evictions over `inputs` in C; the checksum of the evicted pages, as
/// [`domos_grafts::page_eviction::run`] computes it.
///
/// Where the Rust version panics (no inputs at all and `searches > 0`), the C one returns
/// [`domos_grafts::FOLD_START`].
pub fn c_page_eviction(inputs: &[u32], searches: usize) -> u64 {
    // SAFETY: the pointer and length come from one live slice, which the C function only reads,
    // and only within `inputs[..len]`: its LRU takes the first min(len, 4096) words and its hot
    // lists never read past `len`. It keeps no pointer after it returns.
    unsafe { graft_page_eviction(inputs.as_ptr(), inputs.len(), searches) }
}

/// The MD5 digest of `data` in C (RFC 1321), as [`domos_grafts::md5::digest`] computes it.
pub fn c_md5(data: &[u8]) -> [u8; 16] {
    let mut digest = [0u8; 16];
    // SAFETY: `data` is a live slice the C function only reads within `data[..len]`; `digest` is
    // a local array of exactly the 16 bytes it writes. Neither pointer is kept after it returns.
    unsafe { graft_md5(data.as_ptr(), data.len(), digest.as_mut_ptr()) };
    digest
}

/// `inputs` written to a fresh logical disk in C; the checksum of the physical blocks, as
/// [`domos_grafts::logical_disk::run`] computes it.
pub fn c_logical_disk(inputs: &[u32]) -> u64 {
    // SAFETY: the pointer and length come from one live slice, which the C function only reads,
    // one word per write, within `inputs[..len]`. It keeps no pointer after it returns.
    unsafe { graft_logical_disk(inputs.as_ptr(), inputs.len()) }
}

#[cfg(test)]
mod tests {
    use domos_grafts::{FOLD_START, logical_disk, md5, page_eviction};

    use super::*;

    #[test]
    fn c_page_eviction_matches_rust() {
        let searches = page_eviction::SEARCHES;
        let inputs = page_eviction::inputs(searches);
        assert_eq!(c_page_eviction(&inputs, searches), page_eviction::run(&inputs, searches));
        // Short and odd runs too: fewer inputs than frames, and accesses running out.
        for (len, searches) in [(3, 5), (4096, 10), (4100, 200), (5000, 3000)] {
            let inputs = &inputs[..len];
            assert_eq!(c_page_eviction(inputs, searches), page_eviction::run(inputs, searches), "{len} inputs");
        }
        assert_eq!(c_page_eviction(&[], 0), FOLD_START);
    }

    #[test]
    fn c_md5_matches_rust_and_the_rfc_1321_test_suite() {
        let data = md5::inputs();
        assert_eq!(c_md5(&data), md5::digest(&data));
        // Every length around the padding boundaries.
        for len in 0..=130 {
            assert_eq!(c_md5(&data[..len]), md5::digest(&data[..len]), "{len} bytes");
        }
        for (message, expected) in md5::RFC_1321_SUITE {
            assert_eq!(md5::hex(&c_md5(message.as_bytes())), expected, "MD5 (\"{message}\")");
        }
    }

    #[test]
    fn c_logical_disk_matches_rust() {
        let inputs = logical_disk::inputs(logical_disk::WRITES);
        assert_eq!(c_logical_disk(&inputs), logical_disk::run(&inputs));
        // Out-of-range blocks.
        let mut odd = logical_disk::inputs(1000);
        odd[5] = logical_disk::BLOCKS;
        odd[77] = u32::MAX;
        assert_eq!(c_logical_disk(&odd), logical_disk::run(&odd));
        // Every block once, which leaves no empty segment, then more writes, which fail.
        let full: Vec<u32> = (0..logical_disk::BLOCKS).chain(0..100).collect();
        assert_eq!(c_logical_disk(&full), logical_disk::run(&full));
        assert_eq!(c_logical_disk(&[]), FOLD_START);
    }
}
