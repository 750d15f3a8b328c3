/*
 * The prioritisation graft: VM page eviction guided by an application's hot list
 * (grafts/src/page_eviction.rs, on the same data layout).
 *
 * The kernel keeps its frames in a doubly linked LRU queue; the application keeps the pages it
 * will touch next in a singly linked hot list. On each fault the graft walks at most WINDOW
 * frames from the LRU head and picks the first whose page is not hot (the head when all are);
 * the kernel loads the faulting page there and makes it the most recently used.
 */
#include <stdlib.h>

#include "grafts.h"

/* Frames of physical memory, in LRU order. */
#define FRAMES 4096
/* Length of a fresh hot list: the fourth-level pages below one third-level page. */
#define HOT_PAGES 128
/* LRU candidates the kernel offers per eviction. */
#define WINDOW 16

struct frame {
    uint32_t page;
    uint32_t prev;
    uint32_t next;
};

/* The kernel's side: frames in a doubly linked LRU queue, linked by index. */
struct lru {
    struct frame *frames;
    uint32_t head;
    uint32_t tail;
};

struct entry {
    uint32_t page;
    uint32_t next;
};

/* The application's side: its access sequence and the hot list built from it. */
struct hot_list {
    const uint32_t *accesses;
    size_t len;
    size_t consumed;
    struct entry entries[HOT_PAGES];
    uint32_t head;
};

/* Loads page into frame and makes it the most recently used. */
static void lru_replace(struct lru *lru, uint32_t frame, uint32_t page)
{
    uint32_t prev = lru->frames[frame].prev;
    uint32_t next = lru->frames[frame].next;

    lru->frames[frame].page = page;
    if (next == GRAFT_NONE)
        return;
    if (prev == GRAFT_NONE)
        lru->head = next;
    else
        lru->frames[prev].next = next;
    lru->frames[next].prev = prev;
    lru->frames[lru->tail].next = frame;
    lru->frames[frame].prev = lru->tail;
    lru->frames[frame].next = GRAFT_NONE;
    lru->tail = frame;
}

/* The page the application touches next; a new hot list is built when the last is used up. */
static uint32_t hot_touch(struct hot_list *hot)
{
    if (hot->head == GRAFT_NONE) {
        size_t start = hot->consumed;
        size_t end = hot->len - start < HOT_PAGES ? hot->len : start + HOT_PAGES;
        uint32_t n = (uint32_t)(end - start);

        for (uint32_t i = 0; i < n; i++) {
            hot->entries[i].page = hot->accesses[start + i];
            hot->entries[i].next = i + 1;
        }
        if (n > 0) {
            hot->entries[n - 1].next = GRAFT_NONE;
            hot->head = 0;
        }
        hot->consumed = end;
    }
    return hot->head == GRAFT_NONE ? GRAFT_NONE : hot->entries[hot->head].page;
}

/* Whether page is on the hot list: a walk of the linked list. */
static int hot_contains(const struct hot_list *hot, uint32_t page)
{
    uint32_t entry = hot->head;

    /* Two entries per turn, as the Rust graft walks them. */
    for (;;) {
        if (entry == GRAFT_NONE)
            return 0;
        if (hot->entries[entry].page == page)
            return 1;
        entry = hot->entries[entry].next;
        if (entry == GRAFT_NONE)
            return 0;
        if (hot->entries[entry].page == page)
            return 1;
        entry = hot->entries[entry].next;
    }
}

/* The touched page is processed: it leaves the hot list. */
static void hot_processed(struct hot_list *hot)
{
    if (hot->head != GRAFT_NONE)
        hot->head = hot->entries[hot->head].next;
}

/*
 * The graft: walks the LRU queue from its head and returns the first of its WINDOW least
 * recently used frames whose page is not hot, or the head when all are.
 */
static uint32_t choose_victim(const struct lru *lru, const struct hot_list *hot)
{
    uint32_t frame = lru->head;

    for (int i = 0; i < WINDOW && frame != GRAFT_NONE; i++) {
        if (!hot_contains(hot, lru->frames[frame].page))
            return frame;
        frame = lru->frames[frame].next;
    }
    return lru->head;
}

/* One search: the application touches a page, the graft picks a victim, the kernel loads the
 * page there. Returns the evicted page. */
static uint32_t fault(struct lru *lru, struct hot_list *hot)
{
    uint32_t page = hot_touch(hot);
    uint32_t victim = choose_victim(lru, hot);
    uint32_t evicted = lru->frames[victim].page;

    lru_replace(lru, victim, page);
    hot_processed(hot);
    return evicted;
}

uint64_t graft_page_eviction(const uint32_t *inputs, size_t len, size_t searches)
{
    uint32_t n = (uint32_t)(len < FRAMES ? len : FRAMES);
    struct lru lru;
    struct hot_list hot;
    uint64_t sum = GRAFT_FOLD_START;

    if (n == 0)
        return sum;
    lru.frames = malloc(n * sizeof *lru.frames);
    if (lru.frames == NULL)
        abort();
    for (uint32_t i = 0; i < n; i++) {
        lru.frames[i].page = inputs[i];
        lru.frames[i].prev = i == 0 ? GRAFT_NONE : i - 1;
        lru.frames[i].next = i + 1 == n ? GRAFT_NONE : i + 1;
    }
    lru.head = 0;
    lru.tail = n - 1;

    hot.accesses = inputs + n;
    hot.len = len - n;
    hot.consumed = 0;
    hot.head = GRAFT_NONE;

    for (size_t i = 0; i < searches; i++)
        sum = graft_fold(sum, fault(&lru, &hot));
    free(lru.frames);
    return sum;
}
