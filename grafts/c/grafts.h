/*
 * The three grafts of Small and Seltzer, "A Comparison of OS Extension Technologies" (1996),
 * in C: the paper's baseline, compiled with -O2.
 *
 * Each function is the same algorithm, on the same data layout, as its Rust counterpart in
 * grafts/src/ (page_eviction::run, md5::digest, logical_disk::run). The inputs are made by the
 * Rust crate and passed in as arrays, so both sides compute bit-identical checksums.
 */
#ifndef GRAFTS_H
#define GRAFTS_H

#include <stddef.h>
#include <stdint.h>

/* Marks the end of a linked list, an unmapped block or a failed write (Rust: u32::MAX). */
#define GRAFT_NONE UINT32_MAX

/* The starting value of graft_fold. */
#define GRAFT_FOLD_START UINT64_C(0xcbf29ce484222325)

/* Folds value into the running checksum sum (FNV-1a over 32-bit words), as grafts::fold. */
static inline uint64_t graft_fold(uint64_t sum, uint32_t value)
{
    return (sum ^ (uint64_t)value) * UINT64_C(0x100000001b3);
}

/*
 * The prioritisation graft: `searches` page faults over `inputs` (the first 4096 fill memory in
 * LRU order, the rest are the application's accesses, 128 per hot list); returns the checksum of
 * the evicted pages. With no input at all memory is empty and GRAFT_FOLD_START is returned
 * (the Rust version panics there); the process aborts when memory cannot be allocated, as Rust's
 * allocator does.
 */
uint64_t graft_page_eviction(const uint32_t *inputs, size_t len, size_t searches);

/* The stream graft: the RFC 1321 MD5 digest of data[0..len) into digest. */
void graft_md5(const uint8_t *data, size_t len, uint8_t digest[16]);

/*
 * The black-box graft: inputs[0..len) written to a fresh logical disk; returns the checksum of
 * the physical blocks written (GRAFT_NONE for a failed write). Aborts when the disk's 3 MiB of
 * tables cannot be allocated.
 */
uint64_t graft_logical_disk(const uint32_t *inputs, size_t len);

#endif
