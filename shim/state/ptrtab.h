/*
 * ptrtab.h — the pointer side table: each tracked live address maps to the
 * call site that allocated it, so frees, reallocs and munmaps are charged
 * there.  Sharded by address hash; each shard is an open-addressing table
 * that grows by doubling under its lock, in memory from raw mmap.  A
 * shard is chosen by the address's 64 MiB region and hash (mt_ptr_place).
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  Every function takes one shard lock for a probe (but the solo
 * thread's plain put and take: solo.h), never across a call out of the
 * shim.
 */
#ifndef MT_PTRTAB_H
#define MT_PTRTAB_H
#include "state/solo.h"
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

/* filter: keep the filter below (when sampling: most blocks are never in
 * the table, and a free would take a shard lock and probe for each). */
int mt_ptrtab_init(uint64_t max_live, int filter);

/* The address hash. */
static inline uint64_t
mt_ptr_hash(uintptr_t a) {
	uint64_t h = (uint64_t)a * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* The shard (of 64) of an address a with hash h.  Blocks of the main
 * heap (the break's area: the first thread's glibc arena) hash over all
 * 64, so a single-threaded process's tables stay even (their memory a
 * block does not depend on where ASLR put the heap).  Other addresses:
 * bits 26-28 pick one of 8 groups of 8 shards, the hash's bits 58-60
 * the shard in the group.  glibc gives each other thread's arena its own
 * heaps of 64 MiB, aligned to 64 MiB (HEAP_MAX_SIZE), so two threads'
 * blocks fall in different groups (up to 8 heaps in a row) and their
 * puts and takes touch different locks and tables; hashed over all 64
 * shards, each of a 2-thread run's puts took a lock and a slot the other
 * thread had just written (the exact malloc benchmark: 820 -> 680 ns a
 * pair).  The slot in the shard's table is the hash's low bits.
 *
 * A's place: its hash with the shard in the top 6 bits (the main heap's
 * the hash itself; another block's, the hash with its group in bits
 * 61-63), so that one value gives both the shard (>> MT_PLACE_SHARD) and
 * the slot (the low bits: no table has 2^58 slots). */
extern uintptr_t mt_ptr_brk; /* the break when the table was made */
#define MT_PLACE_SHARD 58 /* a place's shard: place >> MT_PLACE_SHARD */
static inline uint64_t
mt_ptr_place(uintptr_t a) {
	uint64_t h = mt_ptr_hash(a);
	if (a - mt_ptr_brk < (1ull << 40))
		return h;
	return (h & ~(7ull << 61)) | (uint64_t)(a >> 26 & 7) << 61;
}

/* A bit a filter slot, set while any entry of the slot is in the table:
 * 8 KiB, so a free's look stays in L1 (a 64 KiB counting filter cost a
 * cache miss a free, 6% of a sampled run).  A slot is 16 bits of the
 * address itself (bits 4-19, xor bits 20-35: glibc's blocks are 16
 * aligned, and the xor spreads page-aligned blocks, whose low bits are
 * all alike), so a free's look is a few shifts and one load: no hash,
 * no shard (the hash and the shard were 20 of its 45 instructions).
 * The slot's counter and bit change under the filter's own lock
 * (ptrtab.c filter_move), taken only when an entry goes in or comes out
 * of a table with a filter (sampling: a sampled or large block, rare);
 * set before an entry goes in, cleared after the last comes out; a free
 * follows its allocation, so a clear bit means "certainly not here".
 * NULL: no filter (exact mode). */
#define MT_FILTER_BITS 16
extern uint64_t *mt_ptr_filter;
/* The filter slot of address a. */
static inline uint64_t
mt_ptr_filter_slot(uintptr_t a) {
	return ((a >> 4) ^ (a >> 20)) & ((1u << MT_FILTER_BITS) - 1);
}
/* Hold the filter's slots of NULL and of every 16-byte address in
 * [lo, hi) set for good, so that a free's look at the filter alone
 * never takes them for blocks of the real allocator's (interpose.c: the
 * pool its hooks hand out while dlsym runs).  Before hooks record; a
 * fork child's emptied filter keeps them. */
void mt_ptrtab_filter_hold(uintptr_t lo, uintptr_t hi);
/* Whether a may be in the table, with a filter (mt_ptr_filter set). */
static inline int
mt_ptrtab_maybe_filtered(uintptr_t a) {
	uint64_t k = mt_ptr_filter_slot(a);
	return (int)(__atomic_load_n(&mt_ptr_filter[k >> 6], __ATOMIC_RELAXED) >> (k & 63) & 1);
}
static inline int
mt_ptrtab_maybe(uintptr_t a) {
	return !mt_ptr_filter || mt_ptrtab_maybe_filtered(a);
}
/* Insert; 0, ENOMEM when the table is full (the caller counts it as
 * dropped and does not charge the site), or EEXIST when a stale entry for
 * the same address was replaced (copied to *replaced for the caller to
 * uncharge).  plain: the caller is the solo thread in a hook that
 * mt_plain_enter allowed (solo.h), and no lock is taken; else takes a
 * shard lock. */
int mt_ptrtab_put(const struct mt_ptr *e, struct mt_ptr *replaced, int plain);
/* The _at forms: addr's place (its shard and hash) given, as ptrsolo.h's
 * mt_ptrtab_prefetch returns it, so that a block's hash is computed once
 * a call. */
int mt_ptrtab_put_at(const struct mt_ptr *e, struct mt_ptr *replaced, int plain, uint64_t place);
/* Remove addr, copying its entry to *out; 1 if it was there.  plain: as
 * for mt_ptrtab_put; else takes a shard lock. */
int mt_ptrtab_take(uintptr_t addr, struct mt_ptr *out, int plain);
int mt_ptrtab_take_at(uintptr_t addr, struct mt_ptr *out, int plain, uint64_t place);
/* The solo thread's common put and take: ptrsolo.h, inline. */
/* Copy addr's entry to *out without removing it; 1 if it is there.
 * Read-only: ends solo mode for a thread other than the solo one (as any
 * change would), then takes the shard's lock for the probe, so a put or
 * take running in another thread is never seen half done; no lock is
 * held once it returns.  For the C API (memtally_owner), not the hot
 * path. */
int mt_ptrtab_find(uintptr_t addr, struct mt_ptr *out);
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
