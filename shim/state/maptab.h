/*
 * maptab.h — tracked mappings (mmap, mmap64, mremap) as address ranges, so
 * that partial munmaps (alignment trims, guard pages), MAP_FIXED
 * replacements and mremap moves are charged to the site that mapped them.
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  Every function takes map_lock, never across a call out.
 */
#ifndef MT_MAPTAB_H
#define MT_MAPTAB_H
#include <stdint.h>

struct mt_map {
	uintptr_t start;  /* first byte */
	uintptr_t end;    /* one past the last byte */
	uint32_t stack;   /* stack id */
	uint8_t kind;     /* MT_MMAP or MT_MMAP_FILE */
	uint8_t counted;  /* this piece carries the site's live_count */
	uint8_t reserved; /* PROT_NONE: address space, not memory: charged
			   * to no site or kind, only to mt_maptab_reserved */
	uint8_t pad;
	uint32_t time_ms; /* ms since process start, when mapped */
};

int mt_maptab_init(uint64_t max);
/* Release [start, end) from every tracked range, uncharging the sites
 * (splitting a range when the hole is in its middle).  Returns the stack
 * and kind of the first range touched in *first (stack 0 if none).
 * Takes map_lock. */
void mt_maptab_release(uintptr_t start, uintptr_t end, struct mt_map *first);
/* Track a new range and charge its site; 0 or ENOMEM (table full).
 * Takes map_lock. */
int mt_maptab_add(const struct mt_map *m);
uint64_t mt_maptab_count(void);
/* The first tracked piece within [start, end) into *m: 1, or 0 if none.
 * Takes map_lock. */
int mt_maptab_find(uintptr_t start, uintptr_t end, struct mt_map *m);
/* Bytes of PROT_NONE reservations tracked (Go's arenas, a JIT's heap):
 * address space, not memory.  A reservation made accessible (MAP_FIXED
 * over it, or mprotect) is charged from then on as any mapping. */
uint64_t mt_maptab_reserved(void);
/* Call fn for every tracked range under map_lock (fn must not touch the
 * map table; it may write(2)).  For dumps. */
void mt_maptab_each(void (*fn)(const struct mt_map *, void *), void *arg);
uint64_t mt_maptab_memory(void);
void mt_maptab_prefork(void);
void mt_maptab_postfork_parent(void);
void mt_maptab_postfork_child(int fresh);

#endif
