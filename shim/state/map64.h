/*
 * map64.h — an open-addressing hash map, u64 key (0 = empty) -> u32 value,
 * in mmap'd arrays that double when half full; deletion by backward shift
 * (no tombstones).  State layer: calls only the platform.  Not locked: the
 * caller holds its own lock.
 * Rules: never calls malloc.
 */
#ifndef MT_MAP64_H
#define MT_MAP64_H
#include <stdint.h>

struct mt_map64 {
	uint64_t *k;
	uint32_t *v;
	uint64_t mask, used;
	uint64_t bytes; /* mapped for the arrays */
};

/* The hash that places a key (home slot = mt_map64_mix(key) & mask). */
static inline uint64_t
mt_map64_mix(uint64_t h) {
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* The value of key, 0 if absent. */
uint32_t mt_map64_get(const struct mt_map64 *m, uint64_t key);
/* Add key -> val in a new slot even if key is there (an index keeping
 * equal hashes side by side).  0 or ENOMEM. */
int mt_map64_insert(struct mt_map64 *m, uint64_t key, uint32_t val);
/* Set key -> val.  0 or ENOMEM. */
int mt_map64_put(struct mt_map64 *m, uint64_t key, uint32_t val);
/* Remove key; 1 if it was there. */
int mt_map64_del(struct mt_map64 *m, uint64_t key);

#endif
