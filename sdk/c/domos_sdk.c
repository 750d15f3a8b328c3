/* domos_sdk.c: locks, the heap, bytes, console, arguments and the message encoding for Domos
 * components written in C (see domos_sdk.h). */
#include "domos_sdk.h"

/* ---- Locks ---- */

/* Spins before each yield: a lock is usually released within a few hundred instructions. */
#define SPINS 64

void domos_lock_take(domos_lock *lock) {
    uint32_t spins = 0;
    while (__atomic_exchange_n(&lock->state, 1u, __ATOMIC_ACQUIRE) != 0) {
        while (__atomic_load_n(&lock->state, __ATOMIC_RELAXED) != 0) {
            if (++spins % SPINS == 0) {
                domos_yield_now();
            }
        }
    }
}

void domos_lock_give(domos_lock *lock) { __atomic_store_n(&lock->state, 0u, __ATOMIC_RELEASE); }

/* ---- Heap ---- */

#define PAGE 65536u
/* Size classes of 16 B to 32 KiB, header included. */
#define CLASSES 12u
#define LARGEST_CLASS (16u << (CLASSES - 1))
/* Larger blocks than this are refused rather than risk overflowing the arithmetic. */
#define MOST (1u << 31)

/* In front of every block. */
typedef struct {
    /* 1 for a block of whole pages, 0 for a block of a size class. */
    uint32_t large;
    /* The class index, or the number of pages. */
    uint32_t size;
} header;

static domos_lock heap_lock;
/* Free blocks of each class, and free large blocks, linked through their first bytes. */
static void *small_free[CLASSES];
static void *large_free;
/* The rest of the last page carved into small blocks. */
static uint8_t *chunk;
static uint32_t chunk_left;

static void *next_of(void *block) { return *(void **)((header *)block + 1); }
static void set_next(void *block, void *next) { *(void **)((header *)block + 1) = next; }

static uint8_t *grow(uint32_t pages) {
    int64_t base = domos_heap_grow(pages);
    return base < 0 ? (uint8_t *)0 : DOMOS_PTR((uint32_t)base);
}

/* A block of class `c` (16 << c bytes), with the heap lock held. */
static void *take_small(uint32_t c) {
    uint32_t size = 16u << c;
    void *block = small_free[c];
    if (block) {
        small_free[c] = next_of(block);
        return block;
    }
    if (chunk_left < size) {
        /* The rest of the old page goes to the free lists of the classes it fits. */
        for (uint32_t k = CLASSES; k-- > 0;) {
            while (chunk_left >= (16u << k)) {
                ((header *)chunk)->large = 0;
                ((header *)chunk)->size = k;
                set_next(chunk, small_free[k]);
                small_free[k] = chunk;
                chunk += 16u << k;
                chunk_left -= 16u << k;
            }
        }
        chunk = grow(1);
        if (!chunk) {
            chunk_left = 0;
            return (void *)0;
        }
        chunk_left = PAGE;
    }
    block = chunk;
    chunk += size;
    chunk_left -= size;
    return block;
}

/* A block of at least `pages` pages, with the heap lock held. */
static void *take_large(uint32_t pages) {
    for (void **link = &large_free; *link; link = (void **)((header *)*link + 1)) {
        void *block = *link;
        if (((header *)block)->size >= pages) {
            *link = next_of(block);
            return block;
        }
    }
    void *block = grow(pages);
    if (block) {
        ((header *)block)->size = pages;
    }
    return block;
}

void *domos_alloc(size_t size) {
    if (size >= MOST) {
        return (void *)0;
    }
    uint32_t need = (uint32_t)size + (uint32_t)sizeof(header);
    void *block;
    domos_lock_take(&heap_lock);
    if (need <= LARGEST_CLASS) {
        uint32_t c = 0;
        while ((16u << c) < need) {
            c++;
        }
        block = take_small(c);
        if (block) {
            ((header *)block)->large = 0;
            ((header *)block)->size = c;
        }
    } else {
        block = take_large((need + PAGE - 1) / PAGE);
        if (block) {
            ((header *)block)->large = 1;
        }
    }
    domos_lock_give(&heap_lock);
    return block ? (void *)((header *)block + 1) : block;
}

void domos_free(void *payload) {
    if (!payload) {
        return;
    }
    header *block = (header *)payload - 1;
    domos_lock_take(&heap_lock);
    if (block->large) {
        set_next(block, large_free);
        large_free = block;
    } else {
        set_next(block, small_free[block->size]);
        small_free[block->size] = block;
    }
    domos_lock_give(&heap_lock);
}

/* ---- Bytes ---- */

void domos_copy(void *dst, const void *src, size_t len) { __builtin_memmove(dst, src, len); }

int domos_compare(const void *a, const void *b, size_t len) {
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < len; i++) {
        if (x[i] != y[i]) {
            return (int)x[i] - (int)y[i];
        }
    }
    return 0;
}

int domos_utf8_valid(const uint8_t *text, uint32_t len) {
    uint32_t i = 0;
    while (i < len) {
        uint8_t b = text[i];
        uint32_t more;
        uint32_t low = 0x80, high = 0xbf; /* the range of the second byte */
        if (b < 0x80) {
            i++;
            continue;
        } else if (b >= 0xc2 && b <= 0xdf) {
            more = 1;
        } else if (b >= 0xe0 && b <= 0xef) {
            more = 2;
            if (b == 0xe0) {
                low = 0xa0; /* no overlong forms */
            } else if (b == 0xed) {
                high = 0x9f; /* no surrogates */
            }
        } else if (b >= 0xf0 && b <= 0xf4) {
            more = 3;
            if (b == 0xf0) {
                low = 0x90;
            } else if (b == 0xf4) {
                high = 0x8f; /* nothing past U+10FFFF */
            }
        } else {
            return 0;
        }
        if (len - i <= more || text[i + 1] < low || text[i + 1] > high) {
            return 0;
        }
        for (uint32_t k = 2; k <= more; k++) {
            if ((text[i + k] & 0xc0) != 0x80) {
                return 0;
            }
        }
        i += more + 1;
    }
    return 1;
}

uint32_t domos_utf8_prefix(const uint8_t *text, uint32_t len, uint32_t chars) {
    uint32_t i = 0;
    for (uint32_t n = 0; n < chars && i < len; n++) {
        uint8_t b = text[i];
        i += b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    }
    return i < len ? i : len;
}

/* ---- Console and arguments ---- */

void domos_print(const char *text) {
    uint32_t len = 0;
    while (text[len]) {
        len++;
    }
    domos_console_write(DOMOS_ADDR(text), len);
}

uint64_t domos_arg_u64(const char *key, uint64_t fallback) {
    uint8_t args[512];
    int64_t whole = domos_args(DOMOS_ADDR(args), sizeof args);
    uint32_t len = whole < 0 ? 0 : whole > (int64_t)sizeof args ? (uint32_t)sizeof args : (uint32_t)whole;
    uint32_t key_len = 0;
    while (key[key_len]) {
        key_len++;
    }
    /* The items, each `[len: u32][bytes]` (domos.h, "Component arguments"). */
    uint32_t i = 0;
    while (len - i >= 4) {
        uint32_t item = (uint32_t)args[i] | (uint32_t)args[i + 1] << 8 | (uint32_t)args[i + 2] << 16 |
                        (uint32_t)args[i + 3] << 24;
        uint32_t start = i + 4;
        if (item > len - start) {
            break;
        }
        i = start + item;
        /* Is this item `key=DIGITS`? */
        if (item > key_len + 1 && domos_compare(args + start, key, key_len) == 0 && args[start + key_len] == '=') {
            uint64_t value = 0;
            uint32_t k = start + key_len + 1;
            for (; k < i && args[k] >= '0' && args[k] <= '9'; k++) {
                value = value * 10 + (uint64_t)(args[k] - '0');
            }
            if (k == i) {
                return value;
            }
        }
    }
    return fallback;
}

/* ---- Messages ---- */

static void store_u32(uint8_t *at, uint32_t value) {
    for (int i = 0; i < 4; i++) {
        at[i] = (uint8_t)(value >> (8 * i));
    }
}

static uint32_t load_u32(const uint8_t *at) {
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

void domos_encoder_init(domos_encoder *e, uint8_t *buffer, uint32_t capacity) {
    e->buffer = buffer;
    e->capacity = capacity;
    e->pos = DOMOS_MESSAGE_PAYLOAD_OFFSET;
    e->handle_count = 0;
    e->failed = capacity < 8;
}

/* Room for `n` more payload bytes, keeping room for the handle count and `handles` handles. */
static int room(domos_encoder *e, uint32_t n, uint32_t handles) {
    uint64_t end = (uint64_t)e->pos + n + 4 + 4 * (uint64_t)handles;
    if (e->failed || end > e->capacity) {
        e->failed = 1;
        return 0;
    }
    return 1;
}

void domos_put_bytes(domos_encoder *e, const void *bytes, uint32_t len) {
    if (room(e, len, e->handle_count)) {
        domos_copy(e->buffer + e->pos, bytes, len);
        e->pos += len;
    }
}

void domos_put_u8(domos_encoder *e, uint8_t value) { domos_put_bytes(e, &value, 1); }

void domos_put_u32(domos_encoder *e, uint32_t value) {
    uint8_t bytes[4];
    store_u32(bytes, value);
    domos_put_bytes(e, bytes, 4);
}

void domos_put_i32(domos_encoder *e, int32_t value) { domos_put_u32(e, (uint32_t)value); }

void domos_put_u64(domos_encoder *e, uint64_t value) {
    uint8_t bytes[8];
    store_u32(bytes, (uint32_t)value);
    store_u32(bytes + 4, (uint32_t)(value >> 32));
    domos_put_bytes(e, bytes, 8);
}

void domos_put_string(domos_encoder *e, const void *bytes, uint32_t len) {
    domos_put_u32(e, len);
    domos_put_bytes(e, bytes, len);
}

void domos_put_handle(domos_encoder *e, uint32_t handle) {
    if (e->handle_count == DOMOS_MAX_MESSAGE_HANDLES || !room(e, 4, e->handle_count + 1)) {
        e->failed = 1;
        domos_handle_drop(handle);
        return;
    }
    e->handles[e->handle_count] = handle;
    e->handle_count++;
    domos_put_u32(e, e->handle_count - 1);
}

int32_t domos_encoder_finish(domos_encoder *e) {
    if (e->failed) {
        for (uint32_t i = 0; i < e->handle_count; i++) {
            domos_handle_drop(e->handles[i]);
        }
        e->handle_count = 0;
        return DOMOS_ERROR_MESSAGE_TOO_LARGE;
    }
    store_u32(e->buffer, e->pos - DOMOS_MESSAGE_PAYLOAD_OFFSET);
    store_u32(e->buffer + e->pos, e->handle_count);
    for (uint32_t i = 0; i < e->handle_count; i++) {
        store_u32(e->buffer + e->pos + 4 + 4 * i, e->handles[i]);
    }
    return (int32_t)(e->pos + 4 + 4 * e->handle_count);
}

int32_t domos_decoder_init(domos_decoder *d, const uint8_t *buffer, uint32_t len) {
    d->pos = 0;
    d->taken = 0;
    d->failed = 1;
    d->payload_len = 0;
    d->handle_count = 0;
    if (len < 8) {
        return DOMOS_ERROR_MALFORMED_MESSAGE;
    }
    uint64_t payload_len = load_u32(buffer);
    if (payload_len + 8 > len) {
        return DOMOS_ERROR_MALFORMED_MESSAGE;
    }
    uint64_t handle_count = load_u32(buffer + DOMOS_MESSAGE_PAYLOAD_OFFSET + payload_len);
    if (handle_count > DOMOS_MAX_MESSAGE_HANDLES || payload_len + 8 + 4 * handle_count != len) {
        return DOMOS_ERROR_MALFORMED_MESSAGE;
    }
    d->payload = buffer + DOMOS_MESSAGE_PAYLOAD_OFFSET;
    d->payload_len = (uint32_t)payload_len;
    d->handles = buffer + 8 + payload_len;
    d->handle_count = (uint32_t)handle_count;
    d->failed = 0;
    return 0;
}

/* The next `n` payload bytes, or NULL (and the decoder failed) when fewer are left. */
static const uint8_t *take(domos_decoder *d, uint32_t n) {
    if (d->failed || n > d->payload_len - d->pos) {
        d->failed = 1;
        return (const uint8_t *)0;
    }
    const uint8_t *at = d->payload + d->pos;
    d->pos += n;
    return at;
}

uint8_t domos_get_u8(domos_decoder *d) {
    const uint8_t *at = take(d, 1);
    return at ? at[0] : 0;
}

uint32_t domos_get_u32(domos_decoder *d) {
    const uint8_t *at = take(d, 4);
    return at ? load_u32(at) : 0;
}

int32_t domos_get_i32(domos_decoder *d) { return (int32_t)domos_get_u32(d); }

uint64_t domos_get_u64(domos_decoder *d) {
    const uint8_t *at = take(d, 8);
    return at ? (uint64_t)load_u32(at) | (uint64_t)load_u32(at + 4) << 32 : 0;
}

uint32_t domos_get_string(domos_decoder *d, const uint8_t **text) {
    uint32_t len = domos_get_u32(d);
    const uint8_t *at = take(d, len);
    if (!at || !domos_utf8_valid(at, len)) {
        d->failed = 1;
        *text = (const uint8_t *)"";
        return 0;
    }
    *text = at;
    return len;
}

uint32_t domos_get_handle(domos_decoder *d) {
    uint32_t index = domos_get_u32(d);
    if (d->failed || index >= d->handle_count || (d->taken & (1u << index))) {
        d->failed = 1;
        return 0;
    }
    d->taken |= 1u << index;
    return load_u32(d->handles + 4 * index);
}

void domos_decoder_drop_untaken(domos_decoder *d) {
    for (uint32_t i = 0; i < d->handle_count; i++) {
        if (!(d->taken & (1u << i))) {
            domos_handle_drop(load_u32(d->handles + 4 * i));
        }
    }
    d->taken = (1u << d->handle_count) - 1;
}
