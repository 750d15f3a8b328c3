//! The black-box graft: a logical disk (de Jonge et al.) that turns random block writes into
//! sequential segment writes and keeps the logical-to-physical block map.
//!
//! As in the paper: a 1 GiB disk of 4 KiB blocks in 64 KiB segments, all data structures in
//! memory, no cleaner, and as many writes as the disk has blocks, 80 % of them to 20 % of the
//! blocks. Each write appends the block to the segment being filled, frees the block's old
//! location, and when the segment is full records its summary (which logical blocks it holds,
//! what the disk would write with the segment) and moves on to the next empty segment. Tables
//! are fixed-size arrays indexed modulo their power-of-two size, so that no bounds check is
//! needed (see `boxed_array`).

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::{FOLD_START, Xorshift, boxed_array, fold};

/// Blocks of the disk (1 GiB of 4 KiB blocks); also the number of logical blocks.
pub const BLOCKS: u32 = 262_144;
/// Blocks per segment (64 KiB).
pub const SEGMENT_BLOCKS: u32 = 16;
/// Segments of the disk.
pub const SEGMENTS: u32 = BLOCKS / SEGMENT_BLOCKS;
/// Writes per run: the number of blocks on the disk, since there is no cleaner.
pub const WRITES: usize = BLOCKS as usize;

/// Marks an unmapped block or a failed write.
pub const NONE: u32 = u32::MAX;

/// The logical blocks written, skewed so that 80 % of the writes go to 20 % of the blocks.
pub fn inputs(writes: usize) -> Vec<u32> {
    let mut random = Xorshift::new(0x5eed_0003);
    let hot = BLOCKS / 5;
    (0..writes)
        .map(|_| if random.below(10) < 8 { random.below(hot) } else { hot + random.below(BLOCKS - hot) })
        .collect()
}

/// The logical disk's state.
#[derive(Debug)]
pub struct LogicalDisk {
    /// Logical block → physical block.
    map: Box<[u32; BLOCKS as usize]>,
    /// Physical block → logical block, for the cleaner this simulation leaves out.
    owner: Box<[u32; BLOCKS as usize]>,
    /// Live blocks per segment.
    live: Box<[u16; SEGMENTS as usize]>,
    /// Per segment, the logical blocks it was written with.
    summaries: Box<[[u32; SEGMENT_BLOCKS as usize]; SEGMENTS as usize]>,
    /// The segment being filled, its summary so far and how many blocks it has.
    current: u32,
    summary: [u32; SEGMENT_BLOCKS as usize],
    filled: u32,
}

impl Default for LogicalDisk {
    fn default() -> Self {
        LogicalDisk {
            map: boxed_array(NONE),
            owner: boxed_array(NONE),
            live: boxed_array(0),
            summaries: boxed_array([NONE; SEGMENT_BLOCKS as usize]),
            current: 0,
            summary: [NONE; SEGMENT_BLOCKS as usize],
            filled: 0,
        }
    }
}

impl LogicalDisk {
    /// Writes logical block `block`: returns the physical block it now lives in, or [`NONE`]
    /// when the block number is out of range or no empty segment is left (a cleaner's job).
    pub fn write(&mut self, block: u32) -> u32 {
        if block >= BLOCKS || self.current == NONE {
            return NONE;
        }
        let (block_at, segment_at) = (|b: u32| b as usize % BLOCKS as usize, |s: u32| s as usize % SEGMENTS as usize);
        let old = self.map[block_at(block)];
        if old != NONE {
            self.live[segment_at(old / SEGMENT_BLOCKS)] -= 1;
            self.owner[block_at(old)] = NONE;
        }
        let physical = self.current * SEGMENT_BLOCKS + self.filled;
        self.map[block_at(block)] = physical;
        self.owner[block_at(physical)] = block;
        self.live[segment_at(self.current)] += 1;
        self.summary[self.filled as usize % SEGMENT_BLOCKS as usize] = block;
        self.filled += 1;
        if self.filled == SEGMENT_BLOCKS {
            self.summaries[segment_at(self.current)] = self.summary;
            self.current = self.next_empty_segment();
            self.filled = 0;
        }
        physical
    }

    /// Where logical block `block` lives, or [`NONE`].
    pub fn lookup(&self, block: u32) -> u32 {
        self.map.get(block as usize).copied().unwrap_or(NONE)
    }

    /// The first segment after the current one with no live block, or [`NONE`].
    fn next_empty_segment(&self) -> u32 {
        (1..SEGMENTS)
            .map(|i| (self.current + i) % SEGMENTS)
            .find(|&s| self.live[s as usize % SEGMENTS as usize] == 0)
            .unwrap_or(NONE)
    }
}

/// One run: `inputs` written to a fresh logical disk; the checksum of the physical blocks.
pub fn run(inputs: &[u32]) -> u64 {
    let mut disk = LogicalDisk::default();
    inputs.iter().fold(FOLD_START, |sum, &block| fold(sum, disk.write(block)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_fill_segments_in_order_and_remap_blocks() {
        let mut disk = LogicalDisk::default();
        assert_eq!(disk.write(7), 0);
        assert_eq!(disk.write(9), 1);
        assert_eq!(disk.write(7), 2);
        assert_eq!(disk.lookup(7), 2);
        assert_eq!(disk.live[0], 2);
        for b in 100..113 {
            disk.write(b);
        }
        // The first segment is full: its summary is recorded and writing moves on.
        assert_eq!(disk.summaries[0][..3], [7, 9, 7]);
        assert_eq!(disk.write(200), SEGMENT_BLOCKS);
        assert_eq!(disk.write(BLOCKS), NONE);
    }

    #[test]
    fn the_paper_workload_never_runs_out_of_segments_and_keeps_the_map_consistent() {
        let inputs = inputs(WRITES);
        let hot = inputs.iter().filter(|&&b| b < BLOCKS / 5).count();
        assert!((0.79..0.81).contains(&(hot as f64 / WRITES as f64)), "{hot} hot writes");
        let mut disk = LogicalDisk::default();
        for &block in &inputs {
            assert_ne!(disk.write(block), NONE);
        }
        for &block in &inputs {
            assert_eq!(disk.owner[disk.lookup(block) as usize], block);
        }
        let live: u32 = disk.live.iter().map(|&l| u32::from(l)).sum();
        assert_eq!(live as usize, disk.map.iter().filter(|&&p| p != NONE).count());
    }
}
