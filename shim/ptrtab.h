/*
 * ptrtab.h — the pointer side table: each tracked live address maps to the
 * call site that allocated it, so frees, reallocs and munmaps are charged
 * there.  Sharded by address hash; each shard is an open-addressing table
 * that grows by doubling under its lock, in memory from raw mmap.
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  Every function takes one shard lock for a probe, never across a
 * call out of the shim.
 */
#ifndef MT_PTRTAB_H
#define MT_PTRTAB_H
#include <stdint.h>

struct mt_ptr {
	uintptr_t addr;   /* key; 0 = empty slot.  CUDA keys carry a tag in
			   * the top bits (cuda.c) so device addresses and
			   * handles never meet host addresses */
	uint64_t size;    /* requested bytes */
	uint32_t stack;   /* stack id */
	uint32_t time_ms; /* ms since process start (coarse clock), for dumps */
	uint8_t kind;     /* enum mt_kind */
	uint8_t sampled;  /* 1: weighted sample (sampling mode) */
	uint8_t device;   /* CUDA device ordinal */
	uint8_t flags;    /* CUDA: MT_PTR_* (cuda.c) */
	uint32_t stream;  /* CUDA stream index (cuda.c), 0 = default */
};

int mt_ptrtab_init(uint64_t max_live);
/* Insert; 0, ENOMEM when the table is full (the caller counts it as
 * dropped and does not charge the site), or EEXIST when a stale entry for
 * the same address was replaced (copied to *replaced for the caller to
 * uncharge).  Takes a shard lock. */
int mt_ptrtab_put(const struct mt_ptr *e, struct mt_ptr *replaced);
/* Remove addr, copying its entry to *out; 1 if it was there.  Takes a shard lock. */
int mt_ptrtab_take(uintptr_t addr, struct mt_ptr *out);
/* Entries live now (racy read). */
uint64_t mt_ptrtab_count(void);
/* Call fn for every entry, one shard at a time under its lock (fn must not
 * touch the pointer table; it may write(2)).  For dumps. */
void mt_ptrtab_each(void (*fn)(const struct mt_ptr *, void *), void *arg);
uint64_t mt_ptrtab_memory(void);
void mt_ptrtab_prefork(void);
void mt_ptrtab_postfork_parent(void);
/* fresh: forget every entry (the child starts with empty tables). */
void mt_ptrtab_postfork_child(int fresh);

/* Key tags: device allocations and handles share the pointer table with
 * host blocks; the top bits keep them apart. */
#define MT_TAG_DEV (1ull << 63)     /* device (and managed, pinned) pointers */
#define MT_TAG_HANDLE (3ull << 62)  /* cuMemCreate handles, CUarrays */
#define MT_TAG_MASK (3ull << 62)
enum { MT_PTR_MAPPED = 1, MT_PTR_HANDLE = 2 }; /* struct mt_ptr flags */

#endif
