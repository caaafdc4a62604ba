/*
 * ptrint.h — what the pointer table's two files share; internal to them
 * (ptrtab.h is the interface the rest of the shim uses).
 *
 *   ptrtab.c   the table's operations: put, take, each, the filter, and
 *              when a table grows or shrinks
 *   ptrmem.c   where a table's slots live: the shards, their mappings and
 *              reservations, and the rehash that moves a table to a new size
 *
 * A shard has two tables, one entry in at most one of them:
 *  - compact: 16-byte slots for host heap blocks, which are nearly all of
 *    a process's entries (1 M live blocks cost ~34 B each, tables
 *    included; the 32-byte entry cost 67 B, and the smaller table stays
 *    in cache for a free's probe);
 *  - wide: struct mt_ptr as it is, for what does not fit a compact slot
 *    (CUDA keys with their tags, device, stream and flags; a host block of
 *    4 GiB or more; an address of 2^47 or above or not 8-aligned).
 * A compact slot:
 *   w0 = addr >> 3 (45 bits: bit 44 is 0, as addr < 2^47, except while
 *        the table is rehashed: MOVING) | stack bits 0-18 << 45
 *   w1 = size (32 bits) | time in 8 ms units (28 bits) << 32
 *        | stack bits 19-21 << 60 | sampled << 63
 *
 * The shards and the byte count are declared hidden (MT_HIDDEN) so that
 * ptrtab.c reads them PC-relative, as it did when they were its statics.
 * Rules: as ptrtab.h; a table changes only under its shard's lock (or
 * by the solo thread: solo.h).
 */
#ifndef MT_PTRINT_H
#define MT_PTRINT_H
#include "platform/glue.h"
#include "state/ptrtab.h"
#include <stddef.h>
#include <stdint.h>

#define NSHARDS 64
#define MIN_SLOTS 256

struct cslot {
	uint64_t w0, w1; /* w0 == 0: empty (a tracked address is never 0) */
};

#define KEY_BITS 45
#define KEY_MASK ((1ull << KEY_BITS) - 1)
#define MOVING (1ull << 44) /* ptrmem.c's rehash: an entry not yet rehashed */
#define STACK_LO 19 /* stack bits kept in w0 */
#define TIME_SHIFT 3
#define TIME_MASK ((1ull << 28) - 1)
_Static_assert(KEY_BITS + STACK_LO == 64, "w0 is full");

/* One open-addressing table: compact (struct cslot) or wide (struct mt_ptr). */
struct tab {
	uint64_t mask;  /* slots - 1, or 0 before first use */
	uint64_t count; /* entries */
	void *slot;     /* [mask + 1] */
};

struct shard {
	mt_lock_t lock;
	struct tab t[2]; /* [0] compact, [1] wide */
	char pad[8];     /* one cache line per shard */
};
_Static_assert(sizeof(struct shard) == 64, "a shard is a cache line");

/* ptrmem.c: the shards, and the bytes their tables and the filter take */
extern MT_HIDDEN struct shard mt_ptr_shards[NSHARDS];
extern MT_HIDDEN uint64_t mt_ptr_table_bytes;

/* The address a compact slot's first word holds (MOVING clear). */
static inline uintptr_t
key_addr(uint64_t w0) {
	return (uintptr_t)((w0 & KEY_MASK) << 3);
}

/* The slot accessors take `wide` as a constant at every call, so each
 * table's loops compile to their own code. */
static inline size_t
slot_size(int wide) {
	return wide ? sizeof(struct mt_ptr) : sizeof(struct cslot);
}

static inline void *
slot_at(const struct tab *t, int wide, uint64_t i) {
	return (char *)t->slot + i * slot_size(wide);
}

static inline uintptr_t
slot_addr(const struct tab *t, int wide, uint64_t i) {
	if (wide)
		return ((const struct mt_ptr *)t->slot)[i].addr;
	return key_addr(((const struct cslot *)t->slot)[i].w0);
}

/* ---- ptrmem.c: a table's memory, under its shard's lock --------------- */

/* Whether a compact table may take a reservation (none when the process
 * has an address-space limit), from mt_ptrtab_init. */
void mt_ptrmem_init(void);
/* Make table `wide` of its shard `slots` slots (twice its own, or
 * MIN_SLOTS when it has none), its entries rehashed.  0, or ENOMEM (the
 * table is kept as it was). */
int mt_ptrmem_grow(struct tab *t, int wide, uint64_t slots);
/* Make it `slots` slots (a fraction of its own, room for its entries at
 * half load); with no memory for the smaller one it keeps the larger. */
void mt_ptrmem_shrink(struct tab *t, int wide, uint64_t slots);
/* Give back a table's memory (its mapping, or its whole reservation);
 * the caller empties the table. */
void mt_ptrmem_unmap(struct tab *t, int wide);

#endif
