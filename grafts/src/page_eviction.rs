//! The prioritisation graft: VM page eviction guided by an application's hot list.
//!
//! The model is the paper's TPC-B b-tree server. Memory holds [`FRAMES`] pages in LRU order.
//! The application walks a database of [`DATA_PAGES`] pages; whenever it reaches a third-level
//! b-tree page it knows the [`HOT_PAGES`] data pages it will touch next and keeps them in a
//! linked *hot list*, removing each as it is processed, so the list holds 64 entries on
//! average. Each touch faults (residency is not tracked), and the kernel asks the graft for a
//! victim among its [`WINDOW`] least recently used pages; the graft returns the first that is
//! not on the hot list (the head when all are, which the kernel then takes anyway).
//! Since a candidate is hot only once in about 781 faults, a search almost always walks the
//! whole hot list once — the linked-list traversal the paper times.
//!
//! Lists live in fixed-size arrays indexed modulo their (power-of-two) size, so that the
//! compiler can prove every index in range and emits no bounds check: the same instructions a
//! C programmer's unchecked arrays give, without `unsafe`.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::{FOLD_START, Xorshift, boxed_array, fold};

/// Pages of the database's fourth level.
pub const DATA_PAGES: u32 = 50_000;
/// Frames of physical memory, in LRU order (a power of two).
pub const FRAMES: usize = 4096;
/// Length of a fresh hot list: the fourth-level pages below one third-level page (a power of
/// two).
pub const HOT_PAGES: usize = 128;
/// Searches per run, as in the paper.
pub const SEARCHES: usize = 100_000;
/// LRU candidates the kernel offers per eviction.
pub const WINDOW: usize = 16;

const NONE: u32 = u32::MAX;

/// The pages a run touches: first the [`FRAMES`] pages memory starts with, then the
/// application's accesses, one hot list of [`HOT_PAGES`] after another.
pub fn inputs(searches: usize) -> Vec<u32> {
    let mut random = Xorshift::new(0x5eed_0001);
    let len = FRAMES + searches.div_ceil(HOT_PAGES) * HOT_PAGES;
    (0..len).map(|_| random.below(DATA_PAGES)).collect()
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    page: u32,
    prev: u32,
    next: u32,
}

/// The kernel's side: frames in a doubly linked LRU queue.
#[derive(Debug)]
pub struct Lru {
    frames: Box<[Frame; FRAMES]>,
    head: u32,
    tail: u32,
}

impl Lru {
    /// Memory holding `pages` (at most [`FRAMES`]), the first least recently used.
    pub fn new(pages: &[u32]) -> Self {
        let n = pages.len().min(FRAMES) as u32;
        let mut frames: Box<[Frame; FRAMES]> = boxed_array(Frame { page: NONE, prev: NONE, next: NONE });
        for i in 0..n {
            frames[i as usize] = Frame {
                page: pages[i as usize],
                prev: if i == 0 { NONE } else { i - 1 },
                next: if i + 1 == n { NONE } else { i + 1 },
            };
        }
        Lru { frames, head: if n == 0 { NONE } else { 0 }, tail: n.wrapping_sub(1) }
    }

    /// The least recently used frame.
    pub fn head(&self) -> u32 {
        self.head
    }

    /// The frame after `frame` in LRU order, or `u32::MAX`.
    pub fn next(&self, frame: u32) -> u32 {
        self.frames[frame as usize % FRAMES].next
    }

    /// The page in `frame`.
    pub fn page(&self, frame: u32) -> u32 {
        self.frames[frame as usize % FRAMES].page
    }

    /// Loads `page` into `frame` and makes it the most recently used.
    pub fn replace(&mut self, frame: u32, page: u32) {
        let at = |frame: u32| frame as usize % FRAMES;
        let Frame { prev, next, .. } = self.frames[at(frame)];
        self.frames[at(frame)].page = page;
        if next == NONE {
            return;
        }
        if prev == NONE {
            self.head = next;
        } else {
            self.frames[at(prev)].next = next;
        }
        self.frames[at(next)].prev = prev;
        self.frames[at(self.tail)].next = frame;
        self.frames[at(frame)] = Frame { page, prev: self.tail, next: NONE };
        self.tail = frame;
    }

    /// The kernel's offer: up to [`WINDOW`] least recently used frames.
    pub fn window(&self) -> ([u32; WINDOW], usize) {
        let mut frames = [NONE; WINDOW];
        let mut frame = self.head;
        let mut n = 0;
        while n < WINDOW && frame != NONE {
            frames[n] = frame;
            frame = self.next(frame);
            n += 1;
        }
        (frames, n)
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    page: u32,
    next: u32,
}

/// The application's side: its access sequence and the hot list built from it.
#[derive(Debug)]
pub struct HotList<'a> {
    accesses: &'a [u32],
    consumed: usize,
    entries: [Entry; HOT_PAGES],
    head: u32,
}

impl<'a> HotList<'a> {
    /// An application about to touch `accesses` in order.
    pub fn new(accesses: &'a [u32]) -> Self {
        HotList { accesses, consumed: 0, entries: [Entry { page: NONE, next: NONE }; HOT_PAGES], head: NONE }
    }

    /// The page the application touches next; a new hot list is built when the last is used up.
    pub fn touch(&mut self) -> u32 {
        if self.head == NONE {
            let fresh = &self.accesses[self.consumed.min(self.accesses.len())..];
            let fresh = &fresh[..fresh.len().min(HOT_PAGES)];
            for (i, &page) in fresh.iter().enumerate() {
                let next = if i + 1 == fresh.len() { NONE } else { i as u32 + 1 };
                self.entries[i] = Entry { page, next };
            }
            self.head = if fresh.is_empty() { NONE } else { 0 };
            self.consumed += fresh.len();
        }
        if self.head == NONE { NONE } else { self.entries[self.head as usize % HOT_PAGES].page }
    }

    /// Whether `page` is on the hot list: a walk of the linked list, two entries per turn of
    /// the loop (which halves the loop's own instructions — in compiled wasm, the preemption
    /// check and the jumps — against the chain of dependent loads). Any index beyond the array
    /// ends the walk, `NONE` among them, so one comparison per step serves as both the
    /// end-of-list test and the bounds check.
    pub fn contains(&self, page: u32) -> bool {
        let mut entry = self.head;
        loop {
            let Some(first) = self.entries.get(entry as usize) else { return false };
            if first.page == page {
                return true;
            }
            let Some(second) = self.entries.get(first.next as usize) else { return false };
            if second.page == page {
                return true;
            }
            entry = second.next;
        }
    }

    /// The touched page is processed: it leaves the hot list.
    pub fn processed(&mut self) {
        if self.head != NONE {
            self.head = self.entries[self.head as usize % HOT_PAGES].next;
        }
    }
}

/// The graft, in the kernel's address space: walks the LRU queue from its head (as the paper's
/// graft is handed a pointer to it) and returns the first of its [`WINDOW`] least recently used
/// frames whose page is not hot, or the head when all are.
pub fn choose_victim(lru: &Lru, hot: &HotList) -> u32 {
    let mut frame = lru.head();
    for _ in 0..WINDOW {
        if frame == NONE {
            break;
        }
        if !hot.contains(lru.page(frame)) {
            return frame;
        }
        frame = lru.next(frame);
    }
    lru.head()
}

/// The graft as a server in another domain, which sees copies of the candidates' pages instead
/// of the queue: the index of the first that is not hot, or 0 when all are.
pub fn choose_among(candidates: &[u32], hot: &HotList) -> usize {
    candidates.iter().take(WINDOW).position(|page| !hot.contains(*page)).unwrap_or(0)
}

/// One search in one address space: the application touches a page, the kernel asks the graft
/// for a victim and loads the page there. Returns the evicted page.
pub fn fault(lru: &mut Lru, hot: &mut HotList) -> u32 {
    let page = hot.touch();
    let victim = choose_victim(lru, hot);
    let evicted = lru.page(victim);
    lru.replace(victim, page);
    hot.processed();
    evicted
}

/// `searches` searches over `inputs`; the checksum of the evicted pages.
pub fn run(inputs: &[u32], searches: usize) -> u64 {
    let (initial, accesses) = inputs.split_at(FRAMES.min(inputs.len()));
    let mut lru = Lru::new(initial);
    let mut hot = HotList::new(accesses);
    (0..searches).fold(FOLD_START, |sum, _| fold(sum, fault(&mut lru, &mut hot)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graft_spares_hot_pages() {
        // Memory holds 7, 8, 9 (7 least recently used); the application will touch 8, then 7.
        let inputs = [7, 8, 9, 8, 7];
        let (initial, accesses) = inputs.split_at(3);
        let mut lru = Lru::new(initial);
        let mut hot = HotList::new(accesses);
        // 7 and 8 are hot, so 9 is evicted for 8 rather than the LRU head 7.
        assert_eq!(fault(&mut lru, &mut hot), 9);
        // Now only 7 is hot: the head (7) is spared again, 8 goes.
        assert_eq!(fault(&mut lru, &mut hot), 8);
    }

    #[test]
    fn hot_lists_average_64_entries_and_hits_are_rare() {
        let inputs = inputs(SEARCHES);
        let (initial, accesses) = inputs.split_at(FRAMES);
        let mut lru = Lru::new(initial);
        let mut hot = HotList::new(accesses);
        let (mut spared, mut length) = (0, 0usize);
        for _ in 0..SEARCHES {
            hot.touch();
            let mut entry = hot.head;
            while entry != NONE {
                length += 1;
                entry = hot.entries[entry as usize % HOT_PAGES].next;
            }
            spared += usize::from(hot.contains(lru.page(lru.head())));
            let page = hot.touch();
            let victim = lru.head();
            lru.replace(victim, page);
            hot.processed();
        }
        let mean = length as f64 / SEARCHES as f64;
        assert!((63.0..=66.0).contains(&mean), "mean hot-list length {mean}");
        // The paper's model saves a page about once in 781 evictions.
        assert!((40..=400).contains(&spared), "{spared} heads were hot");
    }

    #[test]
    fn the_lru_queue_stays_a_permutation() {
        let mut lru = Lru::new(&[10, 11, 12, 13]);
        lru.replace(0, 20);
        lru.replace(2, 22);
        lru.replace(1, 21);
        let mut order = alloc::vec::Vec::new();
        let mut frame = lru.head();
        while frame != NONE {
            order.push(lru.page(frame));
            frame = lru.next(frame);
        }
        assert_eq!(order, [13, 20, 22, 21]);
    }
}
