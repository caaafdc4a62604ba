/*
 * ptrtab.c — the sharded pointer table (ptrtab.h).  Linear probing with
 * backward-shift deletion (no tombstones, so a long-running process never
 * degrades).  A shard's tables start empty, are mapped on first insert,
 * double at half load (up to its share of MEMTALLY_MAX_LIVE) and halve
 * when they fall to an eighth (shrink_if_sparse).
 *
 * Two tables a shard (ptrint.h): compact slots for host heap blocks,
 * wide ones for the rest.  Where their memory comes from, and how a
 * table is taken to a new size, is ptrmem.c.  A compact slot keeps the
 * time in 28 bits of 8 ms, which wrap every 2^28 x 8 ms (24.8 days);
 * mt_ptrtab_each gives the latest time before now with those bits, so an
 * entry older than that is shown 24.8 days younger than it is
 * (doc/FORMAT.md, OOM dumps' time_ms).
 *
 * Entries are removed before the real free runs (the caller's order), so
 * another thread cannot be handed the same address while it is still here.
 */
#include "platform/glue.h"
#include "state/ptrint.h"
#include "state/ptrsolo.h"
#include "state/ptrtab.h"
#include "state/solo.h"
#include "state/sites.h"
#include <stddef.h>
#include <string.h>

/* MEMTALLY_MAX_LIVE, and the entries one shard may hold: a group's
 * share (max_live / 8), since a single-threaded program's blocks may all
 * lie in one 64 MiB region's group.  A table that would grow also checks
 * the sum over shards, so the whole table stops near max_live (below
 * twice it: a shard fills its table to half before it grows). */
static uint64_t max_live;
uint64_t mt_ptr_shard_cap;

/* The filter (ptrtab.h): a counter and a bit a filter slot.  Slots
 * follow the address, not the shard, so two shards' entries may share a
 * slot and a bitmap word: the counters and the bitmap change under
 * filter_lock (a spin lock held for a few instructions, never across a
 * call out, taken inside a shard's lock or by the solo thread; only a
 * table with a filter takes it, and only for its rare entries).
 * Readers load the word without it.  Counters that reach 255 stay there
 * (the bit stays set). */
static mt_lock_t filter_lock;
/* Slots held set for good (filter_hold): the free fast path leaves
 * their addresses to the full path (NULL, the hooks' start-up pool). */
static uintptr_t held_lo, held_hi;
static void filter_hold_all(void);
uint64_t *mt_ptr_filter;
uint8_t *mt_ptr_filter_count;
#define NO_BRK (~(uintptr_t)0 >> 1) /* no address is within 2^40 above it */
uintptr_t mt_ptr_brk = NO_BRK; /* none yet: every address by region */

/* the counters, then the bitmap, in one mapping */
#define FILTER_SLOTS ((size_t)1 << MT_FILTER_BITS)
#define FILTER_BYTES (FILTER_SLOTS + FILTER_SLOTS / 8)

int
mt_ptrtab_init(uint64_t max, int filter) {
	/* brk(0) gives the break; blocks allocated before this stay below it
	 * and take the region rule, which is as fixed as the other.  Set
	 * once: an entry's shard must not change while it is in. */
	long brk = mt_sys(SYS_brk, 0, 0, 0, 0, 0, 0);
	if (brk > 0 && mt_ptr_brk == NO_BRK)
		mt_ptr_brk = (uintptr_t)brk;
	mt_ptrmem_init();
	max_live = max;
	mt_ptr_shard_cap = max / 8;
	if (mt_ptr_shard_cap < 16)
		mt_ptr_shard_cap = 16;
	if (filter) {
		mt_ptr_filter_count = mt_sys_mmap(FILTER_BYTES);
		if (mt_ptr_filter_count) {
			mt_ptr_filter = (uint64_t *)(mt_ptr_filter_count + FILTER_SLOTS);
			mt_add(&mt_ptr_table_bytes, FILTER_BYTES);
			filter_hold_all();
		}
	}
	return 0;
}

/* An entry for a went in (in = 1) or came out (in = 0), under its
 * shard's lock (or by the solo thread); the slot's bit follows its
 * counter to and from zero, under the filter's lock. */
static MT_NOINLINE void
filter_move_locked(uintptr_t a, int in) {
	uint64_t k = mt_ptr_filter_slot(a), bit = 1ull << (k & 63);
	uint8_t *c = &mt_ptr_filter_count[k];
	mt_lock(&filter_lock);
	if (*c != 255 && (in ? (*c)++ == 0 : --*c == 0))
		__atomic_store_n(&mt_ptr_filter[k >> 6],
				 in ? mt_ptr_filter[k >> 6] | bit : mt_ptr_filter[k >> 6] & ~bit,
				 __ATOMIC_RELAXED);
	mt_unlock(&filter_lock);
}

static inline void
filter_move(uintptr_t a, int in) {
	if (MT_UNLIKELY(mt_ptr_filter_count))
		filter_move_locked(a, in);
}

/* Slot k held: set, its counter at 255 (where it stays). */
static void
filter_hold_slot(uint64_t k) {
	mt_ptr_filter_count[k] = 255;
	mt_ptr_filter[k >> 6] |= 1ull << (k & 63);
}

/* NULL and the held range, in a new or emptied filter (single-threaded:
 * the constructor, a fork child). */
static void
filter_hold_all(void) {
	filter_hold_slot(mt_ptr_filter_slot(0));
	for (uintptr_t a = held_lo & ~(uintptr_t)15; a < held_hi; a += 16)
		filter_hold_slot(mt_ptr_filter_slot(a));
}

void
mt_ptrtab_filter_hold(uintptr_t lo, uintptr_t hi) {
	held_lo = lo;
	held_hi = hi;
	if (mt_ptr_filter_count)
		filter_hold_all();
}

/* ---- the two slot forms ------------------------------------------------ */

static inline int
fits_compact(const struct mt_ptr *e) {
	return e->kind == MT_HEAP && compact_addr(e->addr) && !(e->size >> 32) &&
	       !(e->stack >> 22) && !e->device && !e->flags && !e->stream;
}

static inline struct cslot
pack(const struct mt_ptr *e) {
	return pack_heap(e->addr, e->size, e->stack, e->time_ms, e->sampled);
}

/* time_ms comes back as the stored 28 bits x 8 ms; mt_ptrtab_each puts
 * them before now (unpack_time). */
static inline void
unpack(const struct cslot *c, struct mt_ptr *e) {
	memset(e, 0, sizeof *e);
	unpack_heap(c, key_addr(c->w0), e);
	e->time_ms = (uint32_t)((c->w1 >> 32 & TIME_MASK) << TIME_SHIFT);
}

static uint32_t
unpack_time(uint32_t stored, uint64_t now_ms) {
	uint64_t now = now_ms >> TIME_SHIFT;
	uint64_t age = (now - (stored >> TIME_SHIFT)) & TIME_MASK;
	return (uint32_t)((now - age) << TIME_SHIFT);
}

static inline void
slot_get(const struct tab *t, int wide, uint64_t i, struct mt_ptr *out) {
	if (wide)
		*out = ((const struct mt_ptr *)t->slot)[i];
	else
		unpack(&((const struct cslot *)t->slot)[i], out);
}

static inline void
slot_set(struct tab *t, int wide, uint64_t i, const struct mt_ptr *e) {
	if (wide)
		((struct mt_ptr *)t->slot)[i] = *e;
	else
		((struct cslot *)t->slot)[i] = pack(e);
}

/* ---- one table: find, delete, when to resize --------------------------- */

/* Slot of addr, or -1. */
static inline int64_t
tab_find(const struct tab *t, int wide, uintptr_t addr, uint64_t h) {
	if (!t->mask)
		return -1;
	for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
		uintptr_t a = slot_addr(t, wide, i);
		if (a == addr)
			return (int64_t)i;
		if (!a)
			return -1;
	}
}

/* A table that emptied to an eighth of its slots halves until a quarter
 * are used: a table that grew for a peak (PyTorch's import: hundreds of
 * thousands of blocks) does not stay that size for the rest of a run.
 * Between the grow at a half and this there is a factor of two each way,
 * so a count that moves up and down rehashes rarely (amortised O(1)). */
static __attribute__((noinline)) void
shrink_if_sparse(struct tab *t, int wide) {
	uint64_t slots = t->mask + 1;
	if (slots <= MIN_SLOTS || t->count * 8 >= slots)
		return;
	while (slots > MIN_SLOTS && t->count * 4 <= slots / 2)
		slots /= 2;
	mt_ptrmem_shrink(t, wide, slots);
}

/* A table at half load doubles (or is made), unless the whole table
 * holds max_live entries already.  0, or ENOMEM. */
static __attribute__((noinline)) int
tab_grow(struct tab *t, int wide) {
	if (mt_ptrtab_count() >= max_live) /* racy: good enough for a bound */
		return ENOMEM;
	return mt_ptrmem_grow(t, wide, t->mask ? (t->mask + 1) * 2 : MIN_SLOTS);
}

/* ---- the interface ----------------------------------------------------- */

/* Insert e into table `wide` of shard s, under its lock (or by the solo
 * thread: solo.h).  Inlined with wide a constant at each call (the
 * compact table's put was generic code testing `wide` at every slot: ~180
 * instructions a put, ~115 now in callgrind). */
static inline __attribute__((always_inline)) int
put_in(struct shard *s, int wide, const struct mt_ptr *e, struct mt_ptr *replaced,
       uint64_t h) {
	struct tab *t = &s->t[wide], *o = &s->t[!wide];
	if (MT_UNLIKELY(t->count + o->count >= mt_ptr_shard_cap ||
			((t->count + 1) * 2 > t->mask + 1 && tab_grow(t, wide))))
		return ENOMEM;
	/* One probe: the address's stale entry (released behind our back,
	 * e.g. by a raw syscall) or the empty slot it goes in.  A stale one
	 * is handed back so the caller uncharges its site, and replaced. */
	uint64_t i = h & t->mask;
	for (uintptr_t a; (a = slot_addr(t, wide, i)); i = (i + 1) & t->mask) {
		if (MT_UNLIKELY(a == e->addr)) {
			slot_get(t, wide, i, replaced);
			slot_set(t, wide, i, e);
			return EEXIST;
		}
	}
	int err = 0;
	int64_t j = o->count ? tab_find(o, !wide, e->addr, h) : -1;
	if (j >= 0) { /* stale, in the other table: moves to this one */
		slot_get(o, !wide, (uint64_t)j, replaced);
		tab_delete(o, !wide, (uint64_t)j);
		err = EEXIST;
	}
	else
		filter_move(e->addr, 1); /* new to the shard (a move keeps its count) */
	slot_set(t, wide, i, e);
	count_add(t, 1);
	return err;
}

/* A shard's lock, unless the caller is the solo thread working plainly
 * (solo.h); anyone else ends solo mode first. */
static inline void
shard_lock(struct shard *s, int plain) {
	if (plain)
		return;
	mt_solo_gate();
	mt_lock(&s->lock);
}

static inline void
shard_unlock(struct shard *s, int plain) {
	if (!plain)
		mt_unlock(&s->lock);
}

/* The general put under the shard's lock (or by the solo thread). */
static MT_NOINLINE int
put_general(struct shard *s, const struct mt_ptr *e, struct mt_ptr *replaced, uint64_t place) {
	if (MT_LIKELY(fits_compact(e)))
		return put_in(s, 0, e, replaced, place);
	return put_in(s, 1, e, replaced, place);
}

int
mt_ptrtab_put_at(const struct mt_ptr *e, struct mt_ptr *replaced, int plain, uint64_t place) {
	struct shard *s = shard_of(place);
	shard_lock(s, plain);
	int err = fits_compact(e) &&
			  put_common(s, e->addr, e->size, e->stack, e->time_ms, e->sampled, place)
		      ? 0
		      : put_general(s, e, replaced, place);
	shard_unlock(s, plain);
	return err;
}

int
mt_ptrtab_put(const struct mt_ptr *e, struct mt_ptr *replaced, int plain) {
	return mt_ptrtab_put_at(e, replaced, plain, mt_ptr_place(e->addr));
}

/* Take addr from table `wide` of shard s, under its lock (or by the solo
 * thread); 1 if it was there.  Inlined with wide a constant, as put_in. */
static inline __attribute__((always_inline)) int
take_in(struct shard *s, int wide, uintptr_t addr, uint64_t h, struct mt_ptr *out) {
	struct tab *t = &s->t[wide];
	int64_t i = tab_find(t, wide, addr, h);
	if (i < 0)
		return 0;
	slot_get(t, wide, (uint64_t)i, out);
	tab_delete(t, wide, (uint64_t)i);
	if (MT_UNLIKELY(t->mask + 1 > MIN_SLOTS && t->count * 8 < t->mask + 1))
		shrink_if_sparse(t, wide);
	filter_move(addr, 0);
	return 1;
}

/* The general take, under the lock (or by the solo thread): an address
 * no compact slot can hold is looked for in the wide table only; the
 * wide one only when it holds anything. */
static MT_NOINLINE int
take_general(struct shard *s, uintptr_t addr, uint64_t place, struct mt_ptr *out) {
	if (compact_addr(addr) && take_in(s, 0, addr, place, out))
		return 1;
	return s->t[1].count && take_in(s, 1, addr, place, out);
}

int
mt_ptrtab_take_at(uintptr_t addr, struct mt_ptr *out, int plain, uint64_t place) {
	struct shard *s = shard_of(place);
	shard_lock(s, plain);
	struct cslot c;
	int found = 1;
	if (take_common(s, addr, place, &c))
		unpack(&c, out);
	else
		found = take_general(s, addr, place, out);
	shard_unlock(s, plain);
	return found;
}

int
mt_ptrtab_take(uintptr_t addr, struct mt_ptr *out, int plain) {
	return mt_ptrtab_take_at(addr, out, plain, mt_ptr_place(addr));
}

int
mt_ptrtab_find(uintptr_t addr, struct mt_ptr *out) {
	uint64_t place = mt_ptr_place(addr);
	struct shard *s = shard_of(place);
	int found = 0;
	mt_solo_gate();
	mt_lock(&s->lock);
	for (int wide = 0; wide < 2 && !found; wide++) {
		if (!wide && !compact_addr(addr))
			continue; /* no compact slot holds it */
		int64_t i = tab_find(&s->t[wide], wide, addr, place);
		if (i >= 0) {
			slot_get(&s->t[wide], wide, (uint64_t)i, out);
			found = 1;
		}
	}
	mt_unlock(&s->lock);
	return found;
}

void
mt_ptrtab_each(void (*fn)(const struct mt_ptr *, void *), void *arg) {
	uint64_t now = mt_ms_since_start();
	mt_solo_gate();
	for (int k = 0; k < NSHARDS; k++) {
		struct shard *s = &mt_ptr_shards[k];
		mt_lock(&s->lock);
		for (int wide = 0; wide < 2; wide++) {
			struct tab *t = &s->t[wide];
			for (uint64_t i = 0; t->mask && i <= t->mask; i++) {
				if (!slot_addr(t, wide, i))
					continue;
				struct mt_ptr e;
				slot_get(t, wide, i, &e);
				if (!wide)
					e.time_ms = unpack_time(e.time_ms, now);
				fn(&e, arg);
			}
		}
		mt_unlock(&s->lock);
	}
}

uint64_t
mt_ptrtab_count(void) {
	uint64_t n = 0;
	for (int i = 0; i < NSHARDS; i++)
		for (int w = 0; w < 2; w++)
			n += __atomic_load_n(&mt_ptr_shards[i].t[w].count, __ATOMIC_RELAXED);
	return n;
}

uint64_t
mt_ptrtab_memory(void) {
	return __atomic_load_n(&mt_ptr_table_bytes, __ATOMIC_RELAXED);
}

void
mt_ptrtab_prefork(void) {
	mt_solo_gate();
	for (int i = 0; i < NSHARDS; i++)
		mt_lock(&mt_ptr_shards[i].lock);
	mt_lock(&filter_lock);
}

void
mt_ptrtab_postfork_parent(void) {
	mt_unlock(&filter_lock);
	for (int i = 0; i < NSHARDS; i++)
		mt_unlock(&mt_ptr_shards[i].lock);
}

void
mt_ptrtab_postfork_child(int fresh) {
	for (int i = 0; i < NSHARDS; i++) {
		struct shard *s = &mt_ptr_shards[i];
		for (int w = 0; fresh && w < 2; w++) {
			struct tab *t = &s->t[w];
			if (t->mask)
				mt_ptrmem_unmap(t, w);
			t->slot = NULL;
			t->mask = 0;
			t->count = 0;
		}
		s->lock.v = 0;
	}
	filter_lock.v = 0;
	if (fresh) {
		mt_ptr_table_bytes = 0;
		if (mt_ptr_filter_count) { /* the tables are empty: so is the filter */
			memset(mt_ptr_filter_count, 0, FILTER_BYTES);
			mt_ptr_table_bytes = FILTER_BYTES;
			filter_hold_all();
		}
	}
}
