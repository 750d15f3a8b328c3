//! `svc-bcache`: the buffer cache (JX section 3), a write-back cache of disk blocks.
//!
//! Serves `BufferCache` under the name `BufferCache`; uses the `BlockIO` driver it finds under
//! the name `BlockIO`. Arguments: `blocks=N`, the capacity in cache blocks (default 256), and
//! `block=B`, the bytes per cache block (default 4096, a multiple of the 512-byte sector), and
//! `policy=lru|graft`, the replacement policy (default `lru`).
//!
//! **The pool.** Every cached block lives in one memory object of `blocks × block` bytes made at
//! `init`; slot `s` is bytes `[s × block, (s + 1) × block)`. A miss hands the driver a writable
//! view of its slot (`Memory::subrange`), so the disk's I/O thread fills the pool directly; a
//! write-back hands it a read-only view. `view` hands the caller a read-only view of a cached
//! block, revoked when the block is evicted, and `writable_view` a writable one, through which
//! the caller writes in place and then says which blocks it changed (`written`: they are dirty
//! from then on); `read` and `write` copy between the pool and the
//! caller's message (`Memory::read` / `Memory::write`); `read_into` copies from the pool into
//! a memory object the caller hands over (`Memory::copy_from`), block by block.
//!
//! **Replacement.** A map from block number to slot (a `BTreeMap`, O(log n)) and the
//! [`Replacement`] policy, least recently used by default ([`Lru`], a list threaded through the
//! slots, O(1) per access), which picks the slot a missing block takes. With `policy=graft`,
//! Small and Seltzer's page-eviction graft (`grafts/`, the code `domos bench grafts` measures)
//! picks among the 16 least recently used slots the first whose block is not on the caller's
//! hot list (`hint`). Dirty blocks are written back when they are evicted
//! and at `sync`, which writes every dirty block in block order and then flushes the disk;
//! `sync_range` does so for the blocks of one range (a file system's barrier for one new block
//! before what points to it, which leaves a file's other dirty data in the cache).
//!
//! **Runs.** The disk answers a request for many sectors about as fast as one for a few, and
//! each request costs a round through the kernel's disk thread and the driver's interrupt, so
//! the cache moves runs of blocks when it can. A miss on the block after the last one read
//! from the disk (a sequential reader) reads up to `read_ahead=N` blocks (default 64, at most
//! half the capacity; 1 turns it off) that are not cached in one request, as far as the
//! policy's victims are clean (a dirty one ends the run rather than be written back first):
//! straight into their slots when the policy gave them slots that lie one after the other (as
//! LRU does for a reader streaming through the cache), else into a staging memory object, from
//! which each is copied into its slot (`Memory::copy_from`, without passing through the heap).
//! Writing back a dirty block writes the dirty blocks that follow it in the cache with it, in
//! one request, as `sync` does for each run it finds: from their slots when they lie one after
//! the other, else through the staging memory.
//!
//! **Counting.** `hits` are blocks found in the cache, `misses` blocks read from the disk
//! (read-ahead counts each block it reads); a write that covers a whole block not in the cache
//! reads nothing and counts as neither; `write_backs` counts blocks written back.
//!
//! **Waiting.** The manifest says `services_wait`: a miss or a write-back waits for the disk
//! inside the call, which suspends the calling thread (decision 0005). The state is behind one
//! `Mutex`, which no call holds across a disk access, so the cache serves other calls while one
//! waits: hits, and other misses, which then queue their requests at the disk. A slot
//! whose disk access is in flight is marked ([`Transfer`]): one being filled holds no bytes
//! yet, so a call that needs its block waits for it (on a `Condvar`, without the lock), and
//! neither kind is given to another block until its access ends. A write-back marks its blocks
//! clean when it starts, so a block written meanwhile stays dirty and is written again. Every
//! copy between the pool and a caller is made under the lock, from a slot that holds its block
//! then. `hits_beside_disk` counts the hits answered while another call waited for the disk.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::RangeBounds;
use domos_grafts::page_eviction;
use domos_interfaces::block_io::{self, BlockIO};
use domos_interfaces::buffer_cache::{BufferCache, CacheStatistics};
use domos_sdk::{CallError, Condvar, HostError, Memory, Mutex, MutexGuard, Portal, ReadOnlyMemory, names};

domos_sdk::component! { init: init }

/// Bytes per disk sector.
const SECTOR: u64 = 512;
/// The most bytes one `read` or `write` moves (the caller's message limits it further).
const MAX_TRANSFER: u64 = 1 << 20;
/// The most bytes one `read_into` moves: it holds the lock meanwhile, but for its misses.
const MAX_INTO: u64 = 16 << 20;
/// The largest pool a memory object can hold.
const MAX_POOL: u64 = 1 << 30;

fn invalid_argument() -> CallError {
    CallError::Host(HostError::InvalidArgument)
}

/// The value of `key=N` in `args`, `default` when absent; a value that is not a number is an
/// error rather than silently the default.
fn arg(args: &str, key: &str, default: u64) -> Result<u64, CallError> {
    match args.split_whitespace().filter_map(|word| word.split_once('=')).find(|(k, _)| *k == key) {
        None => Ok(default),
        Some((_, value)) => value.parse().map_err(|_| invalid_argument()),
    }
}

fn init() -> Result<(), CallError> {
    let args = domos_sdk::args();
    let capacity = arg(&args, "blocks", 256)?;
    let block = arg(&args, "block", 4096)?;
    let pool_bytes = capacity.checked_mul(block).ok_or_else(invalid_argument)?;
    if capacity == 0 || block == 0 || block % SECTOR != 0 || pool_bytes > MAX_POOL {
        return Err(invalid_argument());
    }
    let read_ahead = arg(&args, "read_ahead", 64)?.clamp(1, (capacity / 2).max(1));
    let disk: Portal<dyn BlockIO> = names::lookup("BlockIO")?;
    let sectors = disk.sectors()?;
    let slots = usize::try_from(capacity).map_err(|_| invalid_argument())?;
    let pool = Memory::new(pool_bytes)?;
    let state = State {
        staging: Some(Staging::new(read_ahead * block)?),
        next_sequential: u64::MAX,
        waiting: 0,
        slots: (0..slots).map(|_| Slot::default()).collect(),
        index: BTreeMap::new(),
        policy: match args.split_whitespace().find_map(|w| w.strip_prefix("policy=")).unwrap_or("lru") {
            "lru" => Box::new(Lru::new(slots)),
            "graft" => Box::new(Grafted { lru: Lru::new(slots), hot: Vec::new() }),
            _ => return Err(invalid_argument()),
        },
        statistics: CacheStatistics { capacity, ..CacheStatistics::default() },
    };
    let cache = Cache {
        disk,
        block,
        sectors,
        read_ahead,
        pooled: pool.read_only()?,
        pool,
        state: Mutex::new(state),
        settled: Condvar::new(),
    };
    names::register("BufferCache", &cache.into_portal())
}

/// A replacement policy: which slot a block that is not in the cache takes.
///
/// The cache tells the policy of every use of a slot and asks it for a victim on a miss, among
/// the slots with no disk access in flight; the victim may be empty (never used yet, or emptied
/// by a failed read), else the cache writes it back if dirty and evicts it. [`Lru`] is the
/// default; [`Grafted`] lets Small and Seltzer's page-eviction graft choose (argument
/// `policy=graft`).
trait Replacement: Send {
    /// `slot` was just used: looked up, filled or overwritten.
    fn used(&mut self, slot: usize);
    /// The slot the next missing block takes, `None` when every slot has a disk access in
    /// flight.
    fn victim(&self, slots: &[Slot]) -> Option<usize>;
    /// The blocks the cache's user will need soon (`BufferCache::hint`).
    fn hint(&mut self, _blocks: &[u64]) {}
}

/// No slot (the end of the list).
const NONE: u32 = u32::MAX;

/// Least recently used: a doubly linked list of all slots threaded through two arrays, least
/// recent first. Slots never used start at the front, so they are taken before any eviction.
struct Lru {
    previous: Vec<u32>,
    next: Vec<u32>,
    /// The least recently used slot.
    head: u32,
    /// The most recently used slot.
    tail: u32,
}

impl Lru {
    fn new(slots: usize) -> Lru {
        let count = slots as u32;
        Lru {
            previous: (0..count).map(|i| if i == 0 { NONE } else { i - 1 }).collect(),
            next: (0..count).map(|i| if i + 1 == count { NONE } else { i + 1 }).collect(),
            head: 0,
            tail: count - 1,
        }
    }

    /// The slots with no disk access in flight, least recently used first.
    fn settled<'a>(&'a self, slots: &'a [Slot]) -> impl Iterator<Item = usize> + 'a {
        let mut slot = self.head;
        core::iter::from_fn(move || {
            let this = (slot != NONE).then_some(slot as usize)?;
            slot = self.next[this];
            Some(this)
        })
        .filter(|&slot| slots[slot].transfer == Transfer::None)
    }
}

impl Replacement for Lru {
    fn used(&mut self, slot: usize) {
        let this = slot as u32;
        if self.tail == this {
            return;
        }
        // Unlink it (it has a successor, since it is not the tail) and append it at the tail.
        let (previous, next) = (self.previous[slot], self.next[slot]);
        if previous == NONE {
            self.head = next;
        } else {
            self.next[previous as usize] = next;
        }
        self.previous[next as usize] = previous;
        self.previous[slot] = self.tail;
        self.next[slot] = NONE;
        self.next[self.tail as usize] = this;
        self.tail = this;
    }

    fn victim(&self, slots: &[Slot]) -> Option<usize> {
        self.settled(slots).next()
    }
}

/// LRU with the page-eviction graft of `grafts/` (the same code `domos bench grafts` measures)
/// choosing among the least recently used slots the first whose block is not on the caller's
/// hot list, as the paper's TPC-B server spares the pages it will touch next.
struct Grafted {
    lru: Lru,
    /// The hinted blocks, as the graft's page numbers.
    hot: Vec<u32>,
}

impl Replacement for Grafted {
    fn used(&mut self, slot: usize) {
        self.lru.used(slot);
    }

    fn victim(&self, slots: &[Slot]) -> Option<usize> {
        let candidates: Vec<usize> = self.lru.settled(slots).take(page_eviction::WINDOW).collect();
        // An empty slot is never hot: u32::MAX is no block.
        let pages: Vec<u32> = candidates.iter().map(|&s| slots[s].block.map_or(u32::MAX, |b| b as u32)).collect();
        let mut hot = page_eviction::HotList::new(&self.hot);
        hot.touch();
        candidates.get(page_eviction::choose_among(&pages, &hot)).copied()
    }

    fn hint(&mut self, blocks: &[u64]) {
        self.hot = blocks.iter().take(page_eviction::HOT_PAGES).map(|&b| b as u32).collect();
    }
}

/// A disk access in flight for a slot, made without the lock.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Transfer {
    #[default]
    None,
    /// The disk is filling the slot with its block: no bytes to read yet.
    Filling,
    /// The disk is taking the slot's bytes (a write-back): they may be read, and written, which
    /// makes the block dirty again, but the slot must not go to another block.
    WritingBack,
}

/// What one slot of the pool holds.
#[derive(Default)]
struct Slot {
    /// The block in the slot, if any.
    block: Option<u64>,
    /// Whether the slot holds bytes the disk has not got yet.
    dirty: bool,
    transfer: Transfer,
    /// The view of the slot that `view` hands out read-only copies of; revoked when the slot is
    /// given to another block, which revokes every copy handed out.
    view: Option<Memory>,
}

/// Where a run of blocks read or written in one request lies on its way when its slots do not
/// lie one after the other (`read_ahead` blocks), and a read-only view of it.
struct Staging {
    memory: Memory,
    view: ReadOnlyMemory,
}

impl Staging {
    fn new(bytes: u64) -> Result<Staging, CallError> {
        let memory = Memory::new(bytes)?;
        Ok(Staging { view: memory.read_only()?, memory })
    }
}

/// Everything the lock protects.
struct State {
    /// The staging memory, taken by the request that uses it; a request that finds it taken
    /// makes its own for the while.
    staging: Option<Staging>,
    /// The block after the last one read from the disk: a miss on it is a sequential reader's.
    next_sequential: u64,
    /// Calls waiting for the disk now.
    waiting: u32,
    slots: Vec<Slot>,
    /// Block number → slot, for the blocks in the cache (in block order, for `sync`).
    index: BTreeMap<u64, usize>,
    policy: Box<dyn Replacement>,
    statistics: CacheStatistics,
}

type Locked<'a> = MutexGuard<'a, State>;

/// The `BufferCache` service.
struct Cache {
    disk: Portal<dyn BlockIO>,
    /// Bytes per cache block.
    block: u64,
    /// The disk's size in sectors.
    sectors: u64,
    /// The most blocks one request moves.
    read_ahead: u64,
    /// The memory object holding every slot, and a read-only view of it.
    pool: Memory,
    pooled: ReadOnlyMemory,
    state: Mutex<State>,
    /// Notified whenever a disk access ends, for the calls waiting for its slots.
    settled: Condvar,
}

impl Cache {
    fn size(&self) -> u64 {
        self.sectors * SECTOR
    }

    /// Bytes of `block` that lie on the disk: all of them but for a short last block.
    fn valid_bytes(&self, block: u64) -> u64 {
        (self.size() - block * self.block).min(self.block)
    }

    /// Runs `derive` on the view of `block`'s slot in the pool, which the views handed out
    /// derive from (revoked when the slot goes to another block); the block is read from the
    /// disk first if it is not cached.
    fn with_slot_view<R>(
        &self,
        block: u64,
        derive: impl FnOnce(&Memory) -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        self.check(block.checked_mul(self.block).ok_or_else(invalid_argument)?, 1)?;
        let (mut state, slot) = self.slot(self.state.lock(), block, true)?;
        if state.slots[slot].view.is_none() {
            state.slots[slot].view = Some(self.pool.subrange(slot as u64 * self.block, self.valid_bytes(block))?);
        }
        match &state.slots[slot].view {
            Some(view) => derive(view),
            None => Err(invalid_argument()),
        }
    }

    /// The first sector and the sector count of `block` on the disk.
    fn sectors_of(&self, block: u64) -> (u64, u32) {
        (block * (self.block / SECTOR), (self.valid_bytes(block) / SECTOR) as u32)
    }

    /// Refuses a transfer of `len` bytes at `offset` that is too long or leaves the device.
    fn check(&self, offset: u64, len: u64) -> Result<(), CallError> {
        let end = offset.checked_add(len).ok_or_else(invalid_argument)?;
        if len > MAX_TRANSFER || end > self.size() {
            return Err(invalid_argument());
        }
        Ok(())
    }

    /// Moves the run of blocks starting at `block`, in `slots`, between the disk and the pool
    /// (`fill`: from the disk) without the lock, which it takes again after. The slots are
    /// marked with their transfer, so nothing else reuses them meanwhile; when it ends, they are
    /// unmarked and the calls waiting for them woken.
    fn transfer<'a>(
        &'a self,
        mut state: Locked<'a>,
        block: u64,
        slots: &[usize],
        fill: bool,
    ) -> Result<Locked<'a>, CallError> {
        let (sector, count) = self.sectors_of(block);
        let bytes = slots.len() as u64 * self.block;
        let count = if slots.len() == 1 { count } else { (bytes / SECTOR) as u32 };
        // A reader or writer that streams through the cache fills and evicts slots in order, so
        // a run's slots usually lie one after the other: the disk takes them where they lie.
        let staging = match slots.windows(2).all(|pair| pair[1] == pair[0] + 1) {
            true => Ok(None),
            false => state.staging.take().map_or_else(|| Staging::new(self.read_ahead * self.block), Ok).map(Some),
        };
        state.waiting += 1;
        drop(state);
        let at = |index: usize| index as u64 * self.block;
        let moved = (|| match (staging.as_ref().map_err(|error| *error)?, fill) {
            (None, true) => {
                block_io::read(&self.disk, sector, count, self.pool.subrange(at(slots[0]), u64::from(count) * SECTOR)?)
            }
            (None, false) => block_io::write(
                &self.disk,
                sector,
                count,
                self.pooled.read_only_subrange(at(slots[0]), u64::from(count) * SECTOR)?,
            ),
            (Some(staging), true) => {
                block_io::read(&self.disk, sector, count, staging.memory.subrange(0, bytes)?)?;
                for (index, &slot) in slots.iter().enumerate() {
                    self.pool.copy_from(at(slot), &staging.view, at(index), self.block)?;
                }
                Ok(())
            }
            (Some(staging), false) => {
                for (index, &slot) in slots.iter().enumerate() {
                    staging.memory.copy_from(at(index), &self.pooled, at(slot), self.block)?;
                }
                block_io::write(&self.disk, sector, count, staging.view.read_only_subrange(0, bytes)?)
            }
        })();
        let mut state = self.state.lock();
        state.waiting -= 1;
        if let (Ok(Some(staging)), None) = (staging, &state.staging) {
            state.staging = Some(staging);
        }
        self.settle(&mut state, slots, fill, moved.is_err());
        if moved.is_ok() && !fill {
            state.statistics.write_backs += slots.len() as u64;
        }
        moved.map(|()| state)
    }

    /// Unmarks `slots` at the end of their transfer (`fill`: from the disk) and wakes the calls
    /// waiting for them. After a `failed` one, slots meant to be filled are left empty and
    /// those written back are dirty again.
    fn settle(&self, state: &mut State, slots: &[usize], fill: bool, failed: bool) {
        for &slot in slots {
            state.slots[slot].transfer = Transfer::None;
            if failed {
                if fill {
                    Self::forget(state, slot);
                } else {
                    state.slots[slot].dirty = true;
                }
            }
        }
        self.settled.notify_all();
    }

    /// Writes `slot` back to the disk if it is dirty and no write-back of it is in flight, with
    /// the dirty blocks that follow it in the cache (whole blocks, up to `read_ahead` in all)
    /// in the same request. The lock is let go meanwhile.
    fn write_back<'a>(&'a self, mut state: Locked<'a>, slot: usize) -> Result<Locked<'a>, CallError> {
        let Slot { block: Some(block), dirty: true, transfer: Transfer::None, .. } = state.slots[slot] else {
            return Ok(state);
        };
        // A short last block goes alone: the run's request is counted in whole blocks.
        let whole = self.valid_bytes(block) == self.block;
        let mut run = vec![slot];
        while whole && (run.len() as u64) < self.read_ahead {
            let next = block + run.len() as u64;
            match state.index.get(&next) {
                Some(&slot)
                    if state.slots[slot].dirty
                        && state.slots[slot].transfer == Transfer::None
                        && self.valid_bytes(next) == self.block =>
                {
                    run.push(slot)
                }
                _ => break,
            }
        }
        for &slot in &run {
            state.slots[slot].dirty = false;
            state.slots[slot].transfer = Transfer::WritingBack;
        }
        self.transfer(state, block, &run, false)
    }

    /// Writes back the dirty blocks among `blocks` that the cache holds, then flushes the disk:
    /// every block dirty when the call began, or on its way to the disk then, is on the disk
    /// when it returns. The index gives them in block order, so that each write-back takes the
    /// run that follows its block, and only the cached ones: a range as long as the disk costs
    /// what the cache holds of it.
    fn sync_blocks(&self, blocks: impl RangeBounds<u64>) -> Result<(), CallError> {
        let mut state = self.state.lock();
        let owed: Vec<u64> = state
            .index
            .range(blocks)
            .filter(|&(_, &slot)| state.slots[slot].dirty || state.slots[slot].transfer == Transfer::WritingBack)
            .map(|(&block, _)| block)
            .collect();
        for block in owed {
            // A block no longer cached was written back before it left.
            while let Some(&slot) = state.index.get(&block) {
                match (state.slots[slot].transfer, state.slots[slot].dirty) {
                    (Transfer::WritingBack, _) => state = self.settled.wait(state),
                    (Transfer::None, true) => {
                        state = self.write_back(state, slot)?;
                        break;
                    }
                    _ => break,
                }
            }
        }
        drop(state);
        block_io::flush(&self.disk)
    }

    /// A slot for a block not in the cache, without letting go of the lock: the policy's
    /// victim, emptied (its view revoked), if it is clean. `None` when the victim is dirty or
    /// every slot has a disk access in flight; [`make_room`](Self::make_room) waits then.
    fn clean_victim(state: &mut State) -> Result<Option<usize>, CallError> {
        let Some(slot) = state.policy.victim(&state.slots) else {
            return Ok(None);
        };
        if state.slots[slot].dirty {
            return Ok(None);
        }
        if let Some(evicted) = state.slots[slot].block.take() {
            state.index.remove(&evicted);
        }
        if let Some(mut view) = state.slots[slot].view.take() {
            // Whoever holds a view of the evicted block must not read the next one's bytes.
            view.revoke()?;
        }
        Ok(Some(slot))
    }

    /// What keeps [`clean_victim`](Self::clean_victim) from a slot: writes the dirty victim
    /// back, or waits for a disk access to end. The lock is let go meanwhile.
    fn make_room<'a>(&'a self, state: Locked<'a>) -> Result<Locked<'a>, CallError> {
        match state.policy.victim(&state.slots) {
            Some(slot) => self.write_back(state, slot),
            None => Ok(self.settled.wait(state)),
        }
    }

    /// Gives the empty `slot` to `block`.
    fn assign(state: &mut State, slot: usize, block: u64, transfer: Transfer) {
        state.slots[slot] = Slot { block: Some(block), dirty: false, transfer, view: None };
        state.index.insert(block, slot);
        state.policy.used(slot);
    }

    /// Forgets `slot`'s block after a failed read: the slot is left empty.
    fn forget(state: &mut State, slot: usize) {
        if let Some(block) = state.slots[slot].block.take() {
            state.index.remove(&block);
        }
    }

    /// The slot holding `block`, with the lock held, evicting the policy's victim if the block
    /// is not cached; the block is read from the disk when `fill`, else the caller is about to
    /// overwrite all of it. A sequential reader's miss reads the blocks that follow too, in the
    /// same request. The lock is let go while the disk works and while another call's disk
    /// access keeps the block or a slot for it, so the slots of the caller's earlier blocks may
    /// have gone to others by the time this returns.
    fn slot<'a>(&'a self, mut state: Locked<'a>, block: u64, fill: bool) -> Result<(Locked<'a>, usize), CallError> {
        loop {
            if let Some(&slot) = state.index.get(&block) {
                if state.slots[slot].transfer == Transfer::Filling {
                    state = self.settled.wait(state);
                    continue;
                }
                state.statistics.hits += 1;
                state.statistics.hits_beside_disk += u64::from(state.waiting > 0);
                state.policy.used(slot);
                return Ok((state, slot));
            }
            let Some(slot) = Self::clean_victim(&mut state)? else {
                // The block may be cached by the time the room is made: look again.
                state = self.make_room(state)?;
                continue;
            };
            if !fill {
                Self::assign(&mut state, slot, block, Transfer::None);
                return Ok((state, slot));
            }
            Self::assign(&mut state, slot, block, Transfer::Filling);
            // How many blocks to read: the run of whole blocks not cached, for a sequential
            // reader, as far as clean slots are to be had at once.
            let mut run = vec![slot];
            if block == state.next_sequential && self.valid_bytes(block) == self.block {
                while (run.len() as u64) < self.read_ahead {
                    let next = block + run.len() as u64;
                    if state.index.contains_key(&next) || (next + 1) * self.block > self.size() {
                        break;
                    }
                    match Self::clean_victim(&mut state) {
                        Ok(Some(slot)) => {
                            Self::assign(&mut state, slot, next, Transfer::Filling);
                            run.push(slot);
                        }
                        Ok(None) => break,
                        Err(error) => {
                            self.settle(&mut state, &run, true, true);
                            return Err(error);
                        }
                    }
                }
            }
            state.statistics.misses += run.len() as u64;
            state.next_sequential = block + run.len() as u64;
            return Ok((self.transfer(state, block, &run, true)?, slot));
        }
    }
}

impl BufferCache for Cache {
    fn block_size(&self) -> Result<u32, CallError> {
        Ok(self.block as u32)
    }

    fn size(&self) -> Result<u64, CallError> {
        Ok(Cache::size(self))
    }

    fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, CallError> {
        self.check(offset, u64::from(len))?;
        let mut out = vec![0u8; len as usize];
        let mut state = self.state.lock();
        let mut done = 0;
        while done < out.len() {
            let at = offset + done as u64;
            let (block, within) = (at / self.block, at % self.block);
            let n = ((self.block - within) as usize).min(out.len() - done);
            let slot;
            (state, slot) = self.slot(state, block, true)?;
            self.pool.read(slot as u64 * self.block + within, &mut out[done..done + n])?;
            done += n;
        }
        Ok(out)
    }

    fn write(&self, offset: u64, bytes: &[u8]) -> Result<(), CallError> {
        self.check(offset, bytes.len() as u64)?;
        let mut state = self.state.lock();
        let mut done = 0;
        while done < bytes.len() {
            let at = offset + done as u64;
            let (block, within) = (at / self.block, at % self.block);
            let n = ((self.block - within) as usize).min(bytes.len() - done);
            let whole = within == 0 && n as u64 == self.valid_bytes(block);
            let slot;
            (state, slot) = self.slot(state, block, !whole)?;
            self.pool.write(slot as u64 * self.block + within, &bytes[done..done + n])?;
            state.slots[slot].dirty = true;
            done += n;
        }
        Ok(())
    }

    fn read_into(&self, offset: u64, len: u64, memory: Memory) -> Result<(), CallError> {
        let end = offset.checked_add(len).ok_or_else(invalid_argument)?;
        if len > MAX_INTO || end > self.size() || len > memory.len()? {
            return Err(invalid_argument());
        }
        let mut state = self.state.lock();
        let mut done = 0;
        // Blocks in slots that follow each other go in one copy (a streaming reader's do). The
        // copy waits for the run's end, so it is made before anything that lets go of the lock,
        // after which its slots may hold other blocks.
        let mut pending: Option<(u64, u64, u64)> = None;
        while done < len {
            let at = offset + done;
            let (block, within) = (at / self.block, at % self.block);
            let n = (self.block - within).min(len - done);
            let ready =
                matches!(state.index.get(&block), Some(&slot) if state.slots[slot].transfer != Transfer::Filling);
            if !ready && let Some((to, source, bytes)) = pending.take() {
                memory.copy_from(to, &self.pooled, source, bytes)?;
            }
            let slot;
            (state, slot) = self.slot(state, block, true)?;
            let from = slot as u64 * self.block + within;
            pending = match pending {
                Some((to, source, bytes)) if source + bytes == from => Some((to, source, bytes + n)),
                Some((to, source, bytes)) => {
                    memory.copy_from(to, &self.pooled, source, bytes)?;
                    Some((done, from, n))
                }
                None => Some((done, from, n)),
            };
            done += n;
        }
        if let Some((to, source, bytes)) = pending {
            memory.copy_from(to, &self.pooled, source, bytes)?;
        }
        drop(state);
        Ok(())
    }

    fn view(&self, block: u64) -> Result<ReadOnlyMemory, CallError> {
        self.with_slot_view(block, Memory::read_only)
    }

    fn writable_view(&self, block: u64) -> Result<Memory, CallError> {
        // Derived from the slot's view: its holder can revoke only its own.
        self.with_slot_view(block, |view| view.subrange(0, view.len()?))
    }

    fn written(&self, blocks: Vec<u64>) -> Result<(), CallError> {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        for block in blocks {
            // A slot being filled holds the block again after an eviction: nothing wrote it.
            if let Some(&slot) = state.index.get(&block)
                && state.slots[slot].transfer != Transfer::Filling
            {
                state.slots[slot].dirty = true;
                state.policy.used(slot);
            }
        }
        Ok(())
    }

    fn hint(&self, blocks: Vec<u64>) -> Result<(), CallError> {
        self.state.lock().policy.hint(&blocks);
        Ok(())
    }

    fn sync(&self) -> Result<(), CallError> {
        self.sync_blocks(..)
    }

    fn sync_range(&self, offset: u64, len: u64) -> Result<(), CallError> {
        let end = offset.checked_add(len).ok_or_else(invalid_argument)?;
        if end > self.size() {
            return Err(invalid_argument());
        }
        self.sync_blocks(offset / self.block..end.div_ceil(self.block))
    }

    fn statistics(&self) -> Result<CacheStatistics, CallError> {
        Ok(self.state.lock().statistics)
    }
}
