/* svc-kv-c: the key-value store of components/svc-kv written again in C.
 *
 * Serves KeyValueStore@1.0 under the name `KeyValueStore` and one Table@1.0 service per table it
 * hands out, to Rust clients that cannot tell it from svc-kv: the same interfaces
 * (interfaces/src/key_value_store.rs, interfaces/src/table.rs), methods, errors and limits,
 * encoded as the Rust SDK encodes them. Arguments: `max_tables=N` (default 64), `max_entries=N`
 * per table (default 100000).
 *
 * Object 1 is the store; object 2 + i is table i. Tables live as long as the component, like
 * svc-kv's, so releasing a service forgets nothing. Each table keeps its entries sorted by key,
 * bytewise, which is the order of Rust's String. */
#include "domos_sdk.h"

DOMOS_MANIFEST("name = \"svc-kv-c\"\n"
               "version = \"1.0.0\"\n"
               "description = \"The key-value store of svc-kv written in C: the same interfaces, served to unchanged Rust clients.\"\n"
               "provides = [\"KeyValueStore@1.0\", \"Table@1.0\"]\n"
               "requires = []\n");

/* Keys and table names: 1 to MAX_NAME bytes (svc-kv's check_name). */
#define MAX_NAME 256u
#define STORE_OBJECT 1u
#define FIRST_TABLE_OBJECT 2u

/* KvError's variants, in declaration order. */
#define KV_INVALID_NAME 0u
#define KV_FULL 1u

typedef struct {
    uint8_t *bytes;
    uint32_t len;
} text;

typedef struct {
    text key;
    text value;
} entry;

typedef struct {
    text name;
    domos_lock lock;
    entry *entries;
    uint32_t count;
    uint32_t capacity;
} table;

static struct {
    domos_lock lock;
    table **tables;
    uint32_t count;
    uint32_t max_tables;
    uint32_t max_entries;
} store;

/* ---- Helpers ---- */

static int copy_text(text *out, const uint8_t *bytes, uint32_t len) {
    out->bytes = domos_alloc(len ? len : 1);
    out->len = len;
    if (!out->bytes) {
        return 0;
    }
    domos_copy(out->bytes, bytes, len);
    return 1;
}

/* Rust's ordering of two strings: bytewise, then shorter first. */
static int compare(const uint8_t *a, uint32_t a_len, const uint8_t *b, uint32_t b_len) {
    int c = domos_compare(a, b, a_len < b_len ? a_len : b_len);
    return c ? c : (a_len > b_len) - (a_len < b_len);
}

/* The index of the first entry whose key is not less than `key`. */
static uint32_t lower_bound(const table *t, const uint8_t *key, uint32_t len) {
    uint32_t lo = 0, hi = t->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (compare(t->entries[mid].key.bytes, t->entries[mid].key.len, key, len) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static int found(const table *t, uint32_t at, const uint8_t *key, uint32_t len) {
    return at < t->count && compare(t->entries[at].key.bytes, t->entries[at].key.len, key, len) == 0;
}

/* Err(KvError::InvalidName(first 32 characters)) when `name` is empty or too long. The name
 * lies in the request, which the reply overwrites: it is copied out first. */
static int invalid_name(domos_encoder *e, const uint8_t *name, uint32_t len) {
    if (len > 0 && len <= MAX_NAME) {
        return 0;
    }
    uint8_t shown[4 * 32];
    uint32_t shown_len = domos_utf8_prefix(name, len, 32);
    domos_copy(shown, name, shown_len);
    domos_put_u8(e, 1);
    domos_put_u32(e, KV_INVALID_NAME);
    domos_put_string(e, shown, shown_len);
    return 1;
}

static void put_full(domos_encoder *e) {
    domos_put_u8(e, 1);
    domos_put_u32(e, KV_FULL);
}

/* Ok(Option<String>): Some(value) or None. */
static void put_ok_option(domos_encoder *e, const text *value) {
    domos_put_u8(e, 0);
    if (value) {
        domos_put_u8(e, 1);
        domos_put_string(e, value->bytes, value->len);
    } else {
        domos_put_u8(e, 0);
    }
}

/* A TableInfo: name, entries, bytes of keys and values. */
static void put_info(domos_encoder *e, const table *t) {
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        bytes += (uint64_t)t->entries[i].key.len + t->entries[i].value.len;
    }
    domos_put_string(e, t->name.bytes, t->name.len);
    domos_put_u64(e, t->count);
    domos_put_u64(e, bytes);
}

/* ---- KeyValueStore ---- */

/* open(name: String) -> Result<Portal<dyn Table>, KvError> */
static int32_t store_open(domos_decoder *d, domos_encoder *e) {
    const uint8_t *name;
    uint32_t len = domos_get_string(d, &name);
    if (d->failed) {
        return DOMOS_ERROR_BAD_REQUEST;
    }
    if (invalid_name(e, name, len)) {
        return 0;
    }
    domos_lock_take(&store.lock);
    uint32_t index = 0;
    while (index < store.count && compare(store.tables[index]->name.bytes, store.tables[index]->name.len, name, len)) {
        index++;
    }
    if (index == store.count) {
        if (store.count >= store.max_tables) {
            domos_lock_give(&store.lock);
            put_full(e);
            return 0;
        }
        table *t = domos_alloc(sizeof *t);
        if (!t || !copy_text(&t->name, name, len)) {
            domos_lock_give(&store.lock);
            return DOMOS_ERROR_QUOTA_EXCEEDED;
        }
        t->lock.state = 0;
        t->entries = 0;
        t->count = t->capacity = 0;
        store.tables[store.count++] = t;
    }
    domos_lock_give(&store.lock);
    /* A service of its own for this portal, as svc-kv exports a fresh object per `open`. */
    int64_t handle = domos_service_create(FIRST_TABLE_OBJECT + index, domos_fnv1a("Table@1"));
    if (handle < 0) {
        return (int32_t)handle;
    }
    domos_put_u8(e, 0);
    domos_put_handle(e, (uint32_t)handle);
    return 0;
}

/* tables() -> Result<Vec<TableInfo>, KvError>, ordered by name. */
static int32_t store_tables(domos_encoder *e) {
    domos_lock_take(&store.lock);
    uint32_t count = store.count;
    table **sorted = domos_alloc(sizeof(table *) * (count ? count : 1));
    if (!sorted) {
        domos_lock_give(&store.lock);
        return DOMOS_ERROR_QUOTA_EXCEEDED;
    }
    for (uint32_t i = 0; i < count; i++) {
        uint32_t at = i;
        while (at > 0 && compare(sorted[at - 1]->name.bytes, sorted[at - 1]->name.len, store.tables[i]->name.bytes,
                                 store.tables[i]->name.len) > 0) {
            sorted[at] = sorted[at - 1];
            at--;
        }
        sorted[at] = store.tables[i];
    }
    domos_lock_give(&store.lock);
    domos_put_u8(e, 0);
    domos_put_u32(e, count);
    for (uint32_t i = 0; i < count; i++) {
        domos_lock_take(&sorted[i]->lock);
        put_info(e, sorted[i]);
        domos_lock_give(&sorted[i]->lock);
    }
    domos_free(sorted);
    return 0;
}

/* ---- Table ---- */

/* put(key: String, value: String) -> Result<Option<String>, KvError> */
static int32_t table_put(table *t, domos_decoder *d, domos_encoder *e) {
    const uint8_t *key, *value;
    uint32_t key_len = domos_get_string(d, &key);
    uint32_t value_len = domos_get_string(d, &value);
    if (d->failed) {
        return DOMOS_ERROR_BAD_REQUEST;
    }
    if (invalid_name(e, key, key_len)) {
        return 0;
    }
    /* Copied before the reply overwrites the request. */
    text new_value;
    if (!copy_text(&new_value, value, value_len)) {
        return DOMOS_ERROR_QUOTA_EXCEEDED;
    }
    domos_lock_take(&t->lock);
    uint32_t at = lower_bound(t, key, key_len);
    if (found(t, at, key, key_len)) {
        text old = t->entries[at].value;
        t->entries[at].value = new_value;
        put_ok_option(e, &old);
        domos_lock_give(&t->lock);
        domos_free(old.bytes);
        return 0;
    }
    if (t->count >= store.max_entries) {
        domos_lock_give(&t->lock);
        domos_free(new_value.bytes);
        put_full(e);
        return 0;
    }
    if (t->count == t->capacity) {
        uint32_t capacity = t->capacity ? 2 * t->capacity : 16;
        entry *grown = domos_alloc(sizeof(entry) * capacity);
        if (!grown) {
            domos_lock_give(&t->lock);
            domos_free(new_value.bytes);
            return DOMOS_ERROR_QUOTA_EXCEEDED;
        }
        domos_copy(grown, t->entries, sizeof(entry) * t->count);
        domos_free(t->entries);
        t->entries = grown;
        t->capacity = capacity;
    }
    text new_key;
    if (!copy_text(&new_key, key, key_len)) {
        domos_lock_give(&t->lock);
        domos_free(new_value.bytes);
        return DOMOS_ERROR_QUOTA_EXCEEDED;
    }
    domos_copy(&t->entries[at + 1], &t->entries[at], sizeof(entry) * (t->count - at));
    t->entries[at].key = new_key;
    t->entries[at].value = new_value;
    t->count++;
    domos_lock_give(&t->lock);
    put_ok_option(e, 0);
    return 0;
}

/* get(key: String) -> Result<Option<String>, KvError>; remove(key) likewise, taking it out. */
static int32_t table_get(table *t, domos_decoder *d, domos_encoder *e, int remove) {
    const uint8_t *key;
    uint32_t key_len = domos_get_string(d, &key);
    if (d->failed) {
        return DOMOS_ERROR_BAD_REQUEST;
    }
    domos_lock_take(&t->lock);
    uint32_t at = lower_bound(t, key, key_len);
    if (!found(t, at, key, key_len)) {
        domos_lock_give(&t->lock);
        put_ok_option(e, 0);
        return 0;
    }
    entry taken = t->entries[at];
    put_ok_option(e, &taken.value);
    if (remove) {
        domos_copy(&t->entries[at], &t->entries[at + 1], sizeof(entry) * (t->count - at - 1));
        t->count--;
    }
    domos_lock_give(&t->lock);
    if (remove) {
        domos_free(taken.key.bytes);
        domos_free(taken.value.bytes);
    }
    return 0;
}

/* scan(prefix: String) -> Result<Vec<Entry>, KvError>: the entries whose keys start with
 * `prefix`, in order. */
static int32_t table_scan(table *t, domos_decoder *d, domos_encoder *e) {
    const uint8_t *prefix;
    uint32_t len = domos_get_string(d, &prefix);
    if (d->failed) {
        return DOMOS_ERROR_BAD_REQUEST;
    }
    domos_lock_take(&t->lock);
    /* The range is found before the reply overwrites the prefix. */
    uint32_t first = lower_bound(t, prefix, len), end = first;
    while (end < t->count && t->entries[end].key.len >= len && domos_compare(t->entries[end].key.bytes, prefix, len) == 0) {
        end++;
    }
    domos_put_u8(e, 0);
    domos_put_u32(e, end - first);
    for (uint32_t i = first; i < end; i++) {
        domos_put_string(e, t->entries[i].key.bytes, t->entries[i].key.len);
        domos_put_string(e, t->entries[i].value.bytes, t->entries[i].value.len);
    }
    domos_lock_give(&t->lock);
    return 0;
}

/* ---- Entry points ---- */

int32_t domos_init(void) {
    store.max_tables = (uint32_t)domos_arg_u64("max_tables", 64);
    store.max_entries = (uint32_t)domos_arg_u64("max_entries", 100000);
    store.tables = domos_alloc(sizeof(table *) * (store.max_tables ? store.max_tables : 1));
    if (!store.tables) {
        domos_print("init failed: no memory for the table list");
        return 1;
    }
    int64_t portal = domos_service_create(STORE_OBJECT, domos_fnv1a("KeyValueStore@1"));
    if (portal < 0) {
        domos_print("init failed: service_create refused");
        return 1;
    }
    static const char name[] = "KeyValueStore";
    if (domos_name_register(DOMOS_ADDR(name), sizeof name - 1, (uint32_t)portal) < 0) {
        domos_print("init failed: name_register refused");
        return 1;
    }
    domos_handle_drop((uint32_t)portal);
    return 0;
}

int32_t domos_dispatch(uint32_t object, uint32_t method, uint32_t buffer, uint32_t len, uint32_t capacity) {
    domos_decoder d;
    if (domos_decoder_init(&d, DOMOS_PTR(buffer), len) < 0) {
        return DOMOS_ERROR_BAD_REQUEST;
    }
    /* Neither interface takes a portal: a request's handles are dropped. */
    domos_decoder_drop_untaken(&d);
    domos_encoder e;
    domos_encoder_init(&e, DOMOS_PTR(buffer), capacity);
    int32_t result;
    if (object == STORE_OBJECT) {
        if (method == domos_fnv1a("open")) {
            result = store_open(&d, &e);
        } else if (method == domos_fnv1a("tables")) {
            result = store_tables(&e);
        } else {
            return DOMOS_ERROR_UNKNOWN_METHOD;
        }
    } else {
        domos_lock_take(&store.lock);
        uint32_t index = object - FIRST_TABLE_OBJECT;
        table *t = object >= FIRST_TABLE_OBJECT && index < store.count ? store.tables[index] : 0;
        domos_lock_give(&store.lock);
        if (!t) {
            return DOMOS_ERROR_SERVICE_DEAD;
        }
        if (method == domos_fnv1a("put")) {
            result = table_put(t, &d, &e);
        } else if (method == domos_fnv1a("get")) {
            result = table_get(t, &d, &e, 0);
        } else if (method == domos_fnv1a("remove")) {
            result = table_get(t, &d, &e, 1);
        } else if (method == domos_fnv1a("scan")) {
            result = table_scan(t, &d, &e);
        } else if (method == domos_fnv1a("info")) {
            domos_lock_take(&t->lock);
            domos_put_u8(&e, 0);
            put_info(&e, t);
            domos_lock_give(&t->lock);
            result = 0;
        } else {
            return DOMOS_ERROR_UNKNOWN_METHOD;
        }
    }
    return result < 0 ? result : domos_encoder_finish(&e);
}

/* Tables outlive their services (svc-kv keeps them too). */
void domos_release(uint32_t object) { (void)object; }

/* The store starts no threads. */
int32_t domos_thread_entry(uint32_t arg) {
    (void)arg;
    return -1;
}
