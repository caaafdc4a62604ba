/*
 * ptrsolo.h — the pointer table's common put and take (ptrtab.h), inline:
 * the solo thread's heap hooks (charge.c) run them without a call (the
 * calls, with their arguments moved and registers saved, were ~45
 * instructions of exact mode's malloc/free pair), and ptrtab.c's locked
 * forms try them first.  The common case: a host heap block in a shard's
 * compact table (ptrint.h), that table dense and below half load, the
 * wide one empty, no filter.
 * Rules: as ptrtab.h's; the caller is the solo thread working plainly
 * (solo.h) or holds the shard's lock.  Never allocates, never calls out.
 */
#ifndef MT_PTRSOLO_H
#define MT_PTRSOLO_H
#include "platform/glue.h"
#include "state/ptrint.h"
#include "state/ptrtab.h"
#include "state/stacks.h"
#include <string.h>

/* MEMTALLY_MAX_LIVE's share a shard (ptrtab.c) */
extern MT_HIDDEN uint64_t mt_ptr_shard_cap;
/* the filter's counters (ptrtab.c: a filter is kept when sampling);
 * NULL: none */
extern MT_HIDDEN uint8_t *mt_ptr_filter_count;

/* An address a compact slot can hold: 8-aligned, below 2^47 (every
 * user address but those a 5-level-paging process asks for above it), so
 * that addr >> 3 leaves bit 44 (MOVING) clear. */
static inline int
compact_addr(uintptr_t a) {
	return !(a & 7) && !(a >> 47);
}

/* A host heap block's compact slot, from its fields (an entry's: pack). */
static inline struct cslot
pack_heap(uintptr_t addr, uint64_t size, uint32_t stack, uint32_t time_ms, int sampled) {
	struct cslot c;
	c.w0 = addr >> 3 | (uint64_t)(stack & ((1u << STACK_LO) - 1)) << KEY_BITS;
	c.w1 = size | ((uint64_t)time_ms >> TIME_SHIFT & TIME_MASK) << 32 |
	       (uint64_t)(stack >> STACK_LO) << 60 | (uint64_t)(sampled != 0) << 63;
	return c;
}

/* A compact slot's heap fields back, into e: its address (addr, known
 * to the caller), size, stack, kind and sampled (what uncharging reads;
 * ptrtab.c unpack adds the rest). */
static inline void
unpack_heap(const struct cslot *c, uintptr_t addr, struct mt_ptr *e) {
	e->addr = addr;
	e->size = c->w1 & 0xffffffffu;
	e->stack = (uint32_t)(c->w0 >> KEY_BITS) | (uint32_t)(c->w1 >> 60 & 7) << STACK_LO;
	e->kind = MT_HEAP;
	e->sampled = (uint8_t)(c->w1 >> 63);
}

/* A table's count changes under its shard's lock (or the solo thread);
 * tab_grow and mt_ptrtab_count read it from other threads without
 * it, so the store is atomic (relaxed: a plain mov). */
static inline void
count_add(struct tab *t, int64_t d) {
	__atomic_store_n(&t->count, t->count + (uint64_t)d, __ATOMIC_RELAXED);
}

static inline void
slot_clear(struct tab *t, int wide, uint64_t i) {
	if (wide)
		((struct mt_ptr *)t->slot)[i].addr = 0;
	else
		((struct cslot *)t->slot)[i].w0 = 0;
}

/* Remove slot i.  Backward-shift deletion: pull later entries of the run
 * into the hole when their home slot is not between the hole and them. */
static inline void
tab_delete(struct tab *t, int wide, uint64_t i) {
	size_t sz = slot_size(wide);
	count_add(t, -1);
	for (uint64_t j = (i + 1) & t->mask;; j = (j + 1) & t->mask) {
		uintptr_t a = slot_addr(t, wide, j);
		if (!a)
			break;
		uint64_t home = mt_ptr_hash(a) & t->mask;
		if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
			memcpy(slot_at(t, wide, i), slot_at(t, wide, j), sz);
			i = j;
		}
	}
	slot_clear(t, wide, i);
}

/* The shard of a place (ptrtab.h mt_ptr_place). */
static inline struct shard *
shard_of(uint64_t place) {
	return &mt_ptr_shards[place >> MT_PLACE_SHARD]; /* NSHARDS == 64 */
}

/* The common put of a host heap block, under the shard's lock (or by
 * the solo thread): a compact entry (fits_compact's tests of its fields:
 * the kind's and the CUDA ones' are the caller's) new to a shard whose
 * compact table has room and whose wide one is empty (no stale entry can
 * be there), without a filter; 1 when done, else 0 with nothing changed
 * (put_general then).  The solo thread's put is this alone
 * (mt_ptrtab_put_solo; the general put_in, with its registers saved and
 * its rare cases tested, was ~110 instructions). */
static inline __attribute__((always_inline)) int
put_common(struct shard *s, uintptr_t addr, uint64_t size, uint32_t stack, uint32_t time_ms,
	   int sampled, uint64_t place) {
	struct tab *t = &s->t[0];
	uint64_t n = t->count, mask = t->mask;
	if (MT_UNLIKELY(((addr & 7) | (addr >> 47) | (size >> 32) | (stack >> 22)) ||
			(n + 1) * 2 > mask + 1 || n >= mt_ptr_shard_cap || s->t[1].count ||
			mt_ptr_filter_count))
		return 0; /* (with a filter, most blocks never come here) */
	struct cslot *sl = t->slot;
	uint64_t i = place & mask, key = addr >> 3;
	for (uint64_t w; (w = sl[i].w0); i = (i + 1) & mask)
		if (MT_UNLIKELY((w & KEY_MASK) == key))
			return 0; /* stale: put_general hands it back */
	sl[i] = pack_heap(addr, size, stack, time_ms, sampled);
	count_add(t, 1);
	return 1;
}

/* The common take, under the shard's lock (or by the solo thread): a
 * host heap block found in its compact table, which stays dense, without
 * a filter; 1 and its slot in *got when done, else 0 with nothing
 * changed (take_general then).  The solo thread's take is this alone
 * (mt_ptrtab_take_solo). */
static inline __attribute__((always_inline)) int
take_common(struct shard *s, uintptr_t addr, uint64_t place, struct cslot *got) {
	struct tab *t = &s->t[0];
	uint64_t mask = t->mask;
	/* no call: a table that would be left sparse (it shrinks) and a
	 * filter to clear are take_general's */
	if (MT_UNLIKELY(!mask || !compact_addr(addr) || mt_ptr_filter_count ||
			(mask + 1 > MIN_SLOTS && (t->count - 1) * 8 < mask + 1)))
		return 0;
	const struct cslot *sl = t->slot;
	uint64_t key = addr >> 3;
	for (uint64_t i = place & mask, w;; i = (i + 1) & mask) {
		if (MT_UNLIKELY(!(w = sl[i].w0)))
			return 0;
		if ((w & KEY_MASK) == key) {
			*got = sl[i];
			tab_delete(t, 0, i);
			return 1;
		}
	}
}

/* ---- the solo thread's forms (ptrtab.h) ---------------------------- */

/* Start loading the slot a host heap block at addr would go in (a cache
 * miss a put, hidden behind the stack capture that comes between).
 * Takes no lock.  Returns addr's place (its shard and hash), for the _at
 * forms (ptrtab.h), so that a block's hash is computed once a call. */
static inline uint64_t
mt_ptrtab_prefetch(uintptr_t addr) {
	uint64_t place = mt_ptr_place(addr);
	struct shard *s = shard_of(place);
	/* racy reads: a table being replaced only wastes the prefetch, and a
	 * prefetch of memory unmapped since never faults */
	uint64_t mask = __atomic_load_n(&s->t[0].mask, __ATOMIC_RELAXED);
	struct cslot *slot = __atomic_load_n((struct cslot **)&s->t[0].slot, __ATOMIC_RELAXED);
	if (mask)
		__builtin_prefetch(&slot[place & mask], 1);
	return place;
}

/* The solo thread's common cases alone (solo.h: plain, no lock): a host
 * heap block new to a compact table with room, put; one found, taken
 * (its table staying dense); without a filter.  1 when done, 0 with
 * nothing changed (then the _at form, plain: it tries the same first).
 * take_solo fills out's addr, size, stack, kind (MT_HEAP) and sampled
 * alone (what uncharging a heap block reads). */
static inline int
mt_ptrtab_put_solo(uintptr_t addr, uint64_t size, uint32_t stack, uint32_t time_ms, int sampled,
		   uint64_t place) {
	return put_common(shard_of(place), addr, size, stack, time_ms, sampled, place);
}

static inline int
mt_ptrtab_take_solo(uintptr_t addr, struct mt_ptr *out, uint64_t place) {
	struct cslot c;
	if (!take_common(shard_of(place), addr, place, &c))
		return 0;
	unpack_heap(&c, addr, out);
	return 1;
}

/* take_solo's, the whole entry (mt_ptrtab_take's): realloc's take,
 * which puts it back when the real call fails */
static inline int
mt_ptrtab_take_solo_whole(uintptr_t addr, struct mt_ptr *out, uint64_t place) {
	struct cslot c;
	if (!take_common(shard_of(place), addr, place, &c))
		return 0;
	memset(out, 0, sizeof *out);
	unpack_heap(&c, addr, out);
	out->time_ms = (uint32_t)((c.w1 >> 32 & TIME_MASK) << TIME_SHIFT);
	return 1;
}

#endif
