/*
 * The black-box graft: a logical disk (de Jonge et al.) that turns random block writes into
 * sequential segment writes and keeps the logical-to-physical block map
 * (grafts/src/logical_disk.rs, on the same data layout): a 1 GiB disk of 4 KiB blocks in
 * 64 KiB segments, everything in memory, no cleaner.
 */
#include <stdlib.h>
#include <string.h>

#include "grafts.h"

/* Blocks of the disk (1 GiB of 4 KiB blocks); also the number of logical blocks. */
#define BLOCKS 262144u
/* Blocks per segment (64 KiB). */
#define SEGMENT_BLOCKS 16u
/* Segments of the disk. */
#define SEGMENTS (BLOCKS / SEGMENT_BLOCKS)

/* The logical disk's state. */
struct logical_disk {
    /* Logical block -> physical block. */
    uint32_t *map;
    /* Physical block -> logical block, for the cleaner this simulation leaves out. */
    uint32_t *owner;
    /* Live blocks per segment. */
    uint16_t *live;
    /* Per segment, the logical blocks it was written with. */
    uint32_t (*summaries)[SEGMENT_BLOCKS];
    /* The segment being filled, its summary so far and how many blocks it has. */
    uint32_t current;
    uint32_t summary[SEGMENT_BLOCKS];
    uint32_t filled;
};

/* The first segment after the current one with no live block, or GRAFT_NONE. */
static uint32_t next_empty_segment(const struct logical_disk *disk)
{
    for (uint32_t i = 1; i < SEGMENTS; i++) {
        uint32_t s = (disk->current + i) % SEGMENTS;
        if (disk->live[s] == 0)
            return s;
    }
    return GRAFT_NONE;
}

/* Writes logical block block: returns the physical block it now lives in, or GRAFT_NONE when
 * the block number is out of range or no empty segment is left. */
static uint32_t disk_write(struct logical_disk *disk, uint32_t block)
{
    uint32_t old, physical;

    if (block >= BLOCKS || disk->current == GRAFT_NONE)
        return GRAFT_NONE;
    old = disk->map[block];
    if (old != GRAFT_NONE) {
        disk->live[old / SEGMENT_BLOCKS]--;
        disk->owner[old] = GRAFT_NONE;
    }
    physical = disk->current * SEGMENT_BLOCKS + disk->filled;
    disk->map[block] = physical;
    disk->owner[physical] = block;
    disk->live[disk->current]++;
    disk->summary[disk->filled] = block;
    disk->filled++;
    if (disk->filled == SEGMENT_BLOCKS) {
        memcpy(disk->summaries[disk->current], disk->summary, sizeof disk->summary);
        disk->current = next_empty_segment(disk);
        disk->filled = 0;
    }
    return physical;
}

uint64_t graft_logical_disk(const uint32_t *inputs, size_t len)
{
    struct logical_disk disk;
    uint64_t sum = GRAFT_FOLD_START;

    disk.map = malloc(BLOCKS * sizeof *disk.map);
    disk.owner = malloc(BLOCKS * sizeof *disk.owner);
    disk.live = calloc(SEGMENTS, sizeof *disk.live);
    disk.summaries = malloc(SEGMENTS * sizeof *disk.summaries);
    if (disk.map == NULL || disk.owner == NULL || disk.live == NULL || disk.summaries == NULL)
        abort();
    /* All-ones bytes make every word GRAFT_NONE. */
    memset(disk.map, 0xff, BLOCKS * sizeof *disk.map);
    memset(disk.owner, 0xff, BLOCKS * sizeof *disk.owner);
    memset(disk.summaries, 0xff, SEGMENTS * sizeof *disk.summaries);
    memset(disk.summary, 0xff, sizeof disk.summary);
    disk.current = 0;
    disk.filled = 0;

    for (size_t i = 0; i < len; i++)
        sum = graft_fold(sum, disk_write(&disk, inputs[i]));

    free(disk.summaries);
    free(disk.live);
    free(disk.owner);
    free(disk.map);
    return sum;
}
