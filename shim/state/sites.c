/*
 * sites.c — the call-site figures of every stack id (sites.h), and each
 * thread's own copy of them.
 *
 * The figures are atomic counters in a chunked array indexed by stack id,
 * read racily by the snapshot writer; the stack table maps an id's chunk
 * before it publishes the id (stacks.c).  The pointer table (ptrtab.c)
 * remembers which site each live allocation belongs to.
 */
#include "platform/glue.h"
#include "state/sites.h"
#include "state/solo.h"
#include "state/chunks.h"
#include <string.h>

static struct mt_chunked sites = {.elem = sizeof(struct mt_site)};
uint8_t mt_site_changed[MT_SITE_GROUPS];

int
mt_sites_init(uint64_t max, int depth) {
	if (mt_stacks_init(max, depth, &sites) || mt_chunk_ensure(&sites, 0))
		return ENOMEM;
	return 0;
}

struct mt_site *
mt_site_get(uint32_t id, int pslot) {
	(void)pslot; /* any: the figures are the id's own */
	return (struct mt_site *)mt_chunk_at(&sites, id);
}

/* Before a site's figures change: if its peak (pslot: its pslot's, or its
 * device's; stacks.h mt_peak_slot) moved since they last changed, what they hold now is what they held at the peak.  (Two
 * threads changing one site across a peak's move may save a figure one
 * change apart.) */
static inline void
keep_at_peak(struct mt_site *s, int pslot) {
	uint32_t e = __atomic_load_n(&mt_peak_epoch[pslot], __ATOMIC_RELAXED);
	if (__builtin_expect(s->atpeak_epoch != e, 0)) {
		s->atpeak_bytes = __atomic_load_n(&s->live_bytes, __ATOMIC_RELAXED);
		s->atpeak_epoch = e;
	}
}

/* ---- each thread's share ------------------------------------------------
 * With two threads charging the same call sites, every allocation and
 * free wrote a line the other thread had just written (the 2-thread
 * exact malloc benchmark: 160 ns of a pair's ~580 ns of overhead went to
 * the call sites' lines).  So each thread that owns a count slot
 * (charge.c: the first MT_TSLOTS - 1 threads) but the first charges its
 * own copy of the figures, one struct mt_site a site in a chunked array
 * of its own, with plain stores (one writer); the first thread (a
 * Python or PyTorch main thread: nearly every site), threads beyond the
 * slots and calls from a thread with no slot yet charge the shared
 * array, as before.  A site's figures are the sum over the arrays
 * (mt_site_read, for the writer; jemalloc's per-thread tctx, summed at a
 * dump).  A free is charged by the thread that frees, so one thread's
 * live bytes may be negative; the sums are exact.
 *
 * What a split costs: a site's peak_bytes.  Once a second array is
 * charged (sites_split), no thread sees a site's whole live bytes, so
 * small allocations raise no peak; an allocation of MT_SITE_BIG or more
 * is charged to the shared figures and raises the peak to the sum of
 * every share (charge_big: a spike's size is exact whichever thread made
 * it), and the writer raises it to the summed live bytes and at-peak
 * bytes it reads (doc/FORMAT.md).  at_peak_bytes
 * keeps its meaning: each array saves its own share at its first change
 * after the peak moved, and the shares add up. */
static struct mt_chunked *tsites[MT_TSLOTS]; /* [slot]; NULL: none yet */
static uint32_t tsites_hi;                   /* slots below it may have one */
static uint64_t tsites_bytes;                /* their directories */
static int sites_split;                      /* a second array was charged */
static MT_TLS uint32_t my_slot;              /* its count slot + 1 if it may
					      * have an array; else 0 */
static MT_TLS struct mt_chunked *my_sites;   /* this thread's array */

void
mt_sites_thread(uint32_t slot) {
	my_slot = slot == 0 || slot >= MT_TSLOTS - 1 ? 0 : slot + 1;
}

/* The thread's own array (made on its first charge, from raw mmap), or
 * NULL: it charges the shared one. */
static __attribute__((noinline)) struct mt_chunked *
mine_make(void) {
	uint32_t slot = my_slot - 1;
	struct mt_chunked *c = mt_sys_mmap(sizeof *c);
	if (!c) {
		my_slot = 0; /* the shared array from now on */
		return NULL;
	}
	c->elem = sizeof(struct mt_site);
	mt_add(&tsites_bytes, sizeof *c);
	__atomic_store_n(&tsites[slot], c, __ATOMIC_RELEASE);
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_RELAXED);
	while (hi < slot + 1 &&
	       !__atomic_compare_exchange_n(&tsites_hi, &hi, slot + 1, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
	__atomic_store_n(&sites_split, 1, __ATOMIC_RELEASE);
	return my_sites = c;
}

/* This thread's figures of site id, making its array or the id's chunk
 * first if need be; NULL: charge the shared ones. */
static __attribute__((noinline)) struct mt_site *
mine_get(uint32_t id) {
	struct mt_chunked *c = my_sites;
	if (!c && (!my_slot || !(c = mine_make())))
		return NULL;
	struct mt_site *s = mt_chunk_at(c, id);
	if (!s && !mt_chunk_ensure(c, id))
		s = mt_chunk_at(c, id);
	return s;
}

/* The hot path looks for the thread's own figures inline and leaves the
 * rest to the noinline paths by a tail call, so it stays a leaf without
 * a frame (import torch: a call in it doubled its instructions). */
static inline struct mt_site *
mine_now(uint32_t id) {
	struct mt_chunked *c = my_sites;
	return c ? mt_chunk_at(c, id) : NULL;
}

/* The site's peak was raised from `was` to `live` by an allocation of
 * `bytes`: stamp when (and at which step) if the raise is worth it. */
static inline void
peak_stamp(struct mt_site *s, int64_t was, int64_t live, int64_t bytes) {
	if (MT_LIKELY(live - was < (live >> 4) && bytes < MT_SITE_BIG))
		return;
	__atomic_store_n(&s->peak_ms, (uint32_t)mt_ms_since_start_fine() + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->peak_step, __atomic_load_n(&mt_step_now, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
}

/* A charge to a site's figures: an allocation (alloc 1: live bytes up,
 * allocs and allocated bytes) or a free (live bytes down, frees). */
static inline __attribute__((always_inline)) void
own_charge(struct mt_site *s, int pslot, int64_t bytes, int64_t count, int alloc) {
	keep_at_peak(s, pslot); /* the thread's own: one writer */
	mt_add_plain(&s->live_bytes, alloc ? bytes : -bytes);
	if (alloc) {
		mt_add_plain(&s->allocs, (uint64_t)count);
		mt_add_plain(&s->alloc_bytes, (uint64_t)bytes);
	} else {
		mt_add_plain(&s->frees, (uint64_t)count);
	}
}

static inline __attribute__((always_inline)) void
shared_charge(uint32_t id, int pslot, int64_t bytes, int64_t count, int plain, int alloc) {
	struct mt_site *s = mt_site_get(id, pslot);
	keep_at_peak(s, pslot);
	int64_t live = mt_addp(plain, &s->live_bytes, alloc ? bytes : -bytes);
	if (alloc) {
		int64_t was = __atomic_load_n(&s->peak_bytes, __ATOMIC_RELAXED);
		if (!__atomic_load_n(&sites_split, __ATOMIC_RELAXED) &&
		    mt_raise_peakp(plain, &s->peak_bytes, live))
			peak_stamp(s, was, live, bytes);
		mt_addp(plain, &s->allocs, (uint64_t)count);
		mt_addp(plain, &s->alloc_bytes, (uint64_t)bytes);
	} else {
		mt_addp(plain, &s->frees, (uint64_t)count);
	}
}

static __attribute__((noinline)) void
charge_slow(uint32_t id, int pslot, int64_t bytes, int64_t count, int plain, int alloc) {
	struct mt_site *s = mine_get(id);
	if (s)
		own_charge(s, pslot, bytes, count, alloc);
	else
		shared_charge(id, pslot, bytes, count, plain, alloc);
}

/* A site's live bytes now: the shared figures and every share summed
 * (racy reads of other threads' plain stores, each whole). */
static int64_t
summed_live(uint32_t id, const struct mt_site *g) {
	int64_t live = __atomic_load_n(&g->live_bytes, __ATOMIC_RELAXED);
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_ACQUIRE);
	for (uint32_t t = 1; t < hi; t++) {
		struct mt_chunked *c = __atomic_load_n(&tsites[t], __ATOMIC_ACQUIRE);
		const struct mt_site *d = c ? mt_chunk_at(c, id) : NULL;
		if (d)
			live += __atomic_load_n(&d->live_bytes, __ATOMIC_RELAXED);
	}
	return live;
}

/* A large allocation once threads charge shares of their own: charged to
 * the shared figures, atomically, and the site's peak raised to the sum
 * of every share, so a transient buffer (a spike) leaves its exact size
 * in peak_bytes whichever thread allocates it.  Rare (MT_SITE_BIG and
 * up), so it may walk the shares. */
static __attribute__((noinline)) void
charge_big(uint32_t id, int pslot, int64_t bytes, int64_t count) {
	struct mt_site *g = mt_site_get(id, pslot);
	keep_at_peak(g, pslot);
	mt_add(&g->live_bytes, bytes);
	mt_add(&g->allocs, (uint64_t)count);
	mt_add(&g->alloc_bytes, (uint64_t)bytes);
	int64_t was = __atomic_load_n(&g->peak_bytes, __ATOMIC_RELAXED);
	int64_t live = summed_live(id, g);
	if (mt_raise_peak(&g->peak_bytes, live))
		peak_stamp(g, was, live, bytes);
}

static inline __attribute__((always_inline)) void
charge(uint32_t id, int pslot, int64_t bytes, int64_t count, int plain, int alloc) {
	struct mt_site *s = mine_now(id);
	if (MT_UNLIKELY(alloc && bytes >= MT_SITE_BIG) &&
	    __atomic_load_n(&sites_split, __ATOMIC_RELAXED))
		charge_big(id, pslot, bytes, count);
	else if (MT_LIKELY(s))
		own_charge(s, pslot, bytes, count, alloc);
	else if (MT_UNLIKELY(my_slot))
		charge_slow(id, pslot, bytes, count, plain, alloc);
	else
		shared_charge(id, pslot, bytes, count, plain, alloc);
	mt_site_touch(id);
}

void
mt_site_alloc(uint32_t id, int pslot, int64_t bytes, int64_t count, int plain) {
	charge(id, pslot, bytes, count, plain, 1);
}

void
mt_site_free(uint32_t id, int pslot, int64_t bytes, int64_t count, int plain) {
	charge(id, pslot, bytes, count, plain, 0);
}

void
mt_site_unfree(uint32_t id, int pslot, int64_t bytes, int64_t count) {
	/* a free undone: a free of minus the bytes and count, atomic if shared */
	charge_slow(id, pslot, -bytes, -count, 0, 0);
	mt_site_touch(id);
}

int
mt_sites_take_changed(uint64_t *set) {
	if (!__atomic_load_n(&mt_membarrier_ok, __ATOMIC_ACQUIRE))
		return 0;
	uint32_t n = (mt_stack_count() + (1u << MT_SITE_GROUP_SHIFT) - 1) >> MT_SITE_GROUP_SHIFT;
	__builtin_memset(set, 0, MT_SITE_GROUPS / 8);
	for (uint32_t g = 0; g < n; g++)
		if (__atomic_load_n(&mt_site_changed[g], __ATOMIC_RELAXED)) {
			__atomic_store_n(&mt_site_changed[g], 0, __ATOMIC_RELAXED);
			set[g >> 6] |= 1ull << (g & 63);
		}
	mt_membarrier(); /* (sites.h) */
	return 1;
}

/* A site's at-peak share, against epoch e. */
static inline int64_t
at_peak_of(const struct mt_site *s, uint32_t e) {
	return s->atpeak_epoch == e ? s->atpeak_bytes : s->live_bytes;
}

/* Thread slot t's figures of site id, or NULL (no array, or it never
 * charged that id's chunk). */
static inline const struct mt_site *
share_of(uint32_t t, uint32_t id) {
	struct mt_chunked *c = __atomic_load_n(&tsites[t], __ATOMIC_ACQUIRE);
	return c ? mt_chunk_at(c, id) : NULL;
}

int
mt_site_read(uint32_t id, int pslot, struct mt_site *out) {
	struct mt_site *g = mt_site_get(id, pslot);
	if (!g)
		return 0;
	uint32_t e = __atomic_load_n(&mt_peak_epoch[pslot], __ATOMIC_RELAXED);
	*out = *g; /* racy copies, as every reader's */
	int64_t at = at_peak_of(out, e);
	int shares = 0;
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_ACQUIRE);
	for (uint32_t t = 1; t < hi; t++) {
		const struct mt_site *d = share_of(t, id);
		if (!d)
			continue;
		struct mt_site x = *d;
		out->live_bytes += x.live_bytes;
		out->allocs += x.allocs;
		out->alloc_bytes += x.alloc_bytes;
		out->frees += x.frees;
		at += at_peak_of(&x, e);
		shares = 1;
	}
	out->atpeak_bytes = at;
	out->atpeak_epoch = e;
	if (shares) { /* the highest the writer has seen (see above) */
		int64_t p = out->live_bytes > at ? out->live_bytes : at;
		if (p > out->peak_bytes) {
			int64_t was = out->peak_bytes;
			out->peak_bytes = p;
			if (mt_raise_peak(&g->peak_bytes, p))
				peak_stamp(g, was, p, 0);
		}
	}
	return out->allocs != 0;
}

int
mt_site_charged(uint32_t id) {
	const struct mt_site *g = mt_site_get(id, 0);
	if (g && __atomic_load_n(&g->allocs, __ATOMIC_RELAXED))
		return 1;
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_ACQUIRE);
	for (uint32_t t = 1; t < hi; t++) {
		const struct mt_site *d = share_of(t, id);
		if (d && __atomic_load_n(&d->allocs, __ATOMIC_RELAXED))
			return 1;
	}
	return 0;
}

void
mt_sites_prefork(void) {
	mt_stacks_prefork();
}

void
mt_sites_postfork_parent(void) {
	mt_stacks_postfork_parent();
}

void
mt_sites_postfork_child(int fresh) {
	mt_stacks_postfork_child(fresh);
	if (!fresh)
		return;
	/* The child's figures start from zero; its stacks are the parent's. */
	mt_chunk_reset(&sites);
	for (uint32_t t = 0; t < tsites_hi; t++)
		if (tsites[t])
			mt_chunk_reset(tsites[t]);
	/* one thread now: the figures are split only if it has a share */
	sites_split = my_sites != NULL;
	mt_totals_reset();
}

uint64_t
mt_sites_memory(uint64_t *stack_bytes, uint64_t *site_bytes) {
	*stack_bytes = mt_stacks_memory();
	*site_bytes = sites.mapped + __atomic_load_n(&tsites_bytes, __ATOMIC_RELAXED);
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_ACQUIRE);
	for (uint32_t t = 1; t < hi; t++) {
		struct mt_chunked *c = __atomic_load_n(&tsites[t], __ATOMIC_ACQUIRE);
		if (c)
			*site_bytes += __atomic_load_n(&c->mapped, __ATOMIC_RELAXED);
	}
	return *stack_bytes + *site_bytes;
}
