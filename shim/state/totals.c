/*
 * totals.c — the process's exact totals per kind and the heap's counts per
 * thread slot (totals.h).
 */
#include "platform/glue.h"
#include "state/totals.h"
#include <string.h>

struct mt_totals mt_totals[MT_NKINDS];
struct mt_tcount mt_tcounts[MT_TSLOTS];
uint32_t mt_peak_epoch[MT_PEAK_SLOTS];
int64_t mt_since_peak[MT_NSINCE];
int mt_since_on;

/* The heap's live bytes reached live: its peak raised (and moved) if below. */
static void
heap_peak_to(int64_t live) {
	if (mt_raise_peak(&mt_totals[MT_HEAP].peak_bytes, live))
		mt_peak_moved(MT_HEAP);
}

/* Slots whose owner is gone: their pending bytes to the shared figure
 * (no thread writes such a slot any more; a tid used again by a new
 * thread only leaves the bytes where they are, still counted). */
static void
fold_ended(void) {
	uint64_t me = (uint64_t)mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
	for (int i = 0; i < MT_TSLOTS - 1; i++) {
		struct mt_tcount *c = &mt_tcounts[i];
		uint64_t o = __atomic_load_n(&c->owner, __ATOMIC_ACQUIRE);
		if (!o || !__atomic_load_n(&c->live_pending, __ATOMIC_RELAXED) || o >> 32 != me ||
		    mt_sys(SYS_tgkill, o >> 32, (uint32_t)o, 0, 0, 0, 0) != -ESRCH)
			continue;
		int64_t p = __atomic_exchange_n(&c->live_pending, 0, __ATOMIC_RELAXED);
		if (p)
			heap_peak_to(mt_add(&mt_totals[MT_HEAP].live_bytes, p));
	}
}

void
mt_heap_counts(struct mt_totals *t) {
	fold_ended();
	t->live_bytes = __atomic_load_n(&mt_totals[MT_HEAP].live_bytes, __ATOMIC_RELAXED);
	t->peak_bytes = __atomic_load_n(&mt_totals[MT_HEAP].peak_bytes, __ATOMIC_RELAXED);
	uint64_t a = 0, b = 0, f = 0, lc = 0, fb = 0;
	for (int i = 0; i < MT_TSLOTS; i++) {
		a += __atomic_load_n(&mt_tcounts[i].allocs, __ATOMIC_RELAXED);
		b += __atomic_load_n(&mt_tcounts[i].alloc_bytes, __ATOMIC_RELAXED);
		f += __atomic_load_n(&mt_tcounts[i].frees, __ATOMIC_RELAXED);
		lc += __atomic_load_n(&mt_tcounts[i].live_count, __ATOMIC_RELAXED);
		fb += __atomic_load_n(&mt_tcounts[i].free_bytes, __ATOMIC_RELAXED);
	}
	t->allocs = a;
	t->alloc_bytes = b;
	t->frees = f;
	t->live_count = (int64_t)lc;
	t->free_bytes = fb;
	t->live_bytes += mt_heap_pending();
	if (t->live_bytes > t->peak_bytes) { /* a peak the pending held back */
		t->peak_bytes = t->live_bytes;
		heap_peak_to(t->live_bytes);
	}
}

int64_t
mt_heap_pending(void) {
	int64_t p = 0;
	for (int i = 0; i < MT_TSLOTS; i++)
		p += __atomic_load_n(&mt_tcounts[i].live_pending, __ATOMIC_RELAXED);
	return p;
}

void
mt_totals_alloc(int kind, uint64_t bytes) {
	struct mt_totals *t = &mt_totals[kind];
	mt_add(&t->allocs, 1);
	mt_add(&t->alloc_bytes, bytes);
	mt_add(&t->live_count, 1);
	int64_t live = mt_add(&t->live_bytes, (int64_t)bytes);
	if (mt_raise_peak(&t->peak_bytes, live))
		mt_peak_moved(kind);
	mt_since_raise(0, kind, live);
}

void
mt_totals_free(int kind, uint64_t bytes, int whole) {
	struct mt_totals *t = &mt_totals[kind];
	mt_add(&t->live_bytes, -(int64_t)bytes);
	mt_add(&t->free_bytes, bytes);
	if (whole) {
		mt_add(&t->frees, 1);
		mt_add(&t->live_count, -1);
	}
}

void
mt_totals_reset(void) {
	memset(mt_totals, 0, sizeof mt_totals);
	memset(mt_peak_epoch, 0, sizeof mt_peak_epoch);
	memset(mt_tcounts, 0, sizeof mt_tcounts);
	memset(mt_since_peak, 0, sizeof mt_since_peak);
}

void
mt_since_reset(void) {
	__atomic_store_n(&mt_since_on, 1, __ATOMIC_RELAXED); /* then the figures it starts from */
	for (int i = 0; i < MT_NSINCE; i++)
		__atomic_store_n(&mt_since_peak[i], mt_since_live(i), __ATOMIC_RELAXED);
}
