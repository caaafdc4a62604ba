/* test_tables — the shim's tables used from 4 threads at once, outside
 * LD_PRELOAD: stack interning (lock-free lookups racing inserts and index
 * growth), call-site counters, the pointer table (shard growth, backward-
 * shift deletion, shrinking after a peak) and the map table.  Built twice by `make check`: with
 * ASan+UBSan and with TSan.  Exact figures are asserted at the end. */
#include "../test.h"
#include "sites.h"
#include "ptrtab.h"
#include "maptab.h"
#include "config.h"
#include <pthread.h>
#include <string.h>

#define NT 4
#define N 20000

static void *worker(void *arg) {
	long t = (long)arg;
	for (long i = 0; i < N; i++) {
		uintptr_t pcs[6] = {0x1000, 0x2000 + (uintptr_t)(i % 300), 0x3000, (uintptr_t)t, 7, 8};
		uint32_t id = mt_stack_intern(pcs, 6, MT_HEAP, 0);
		uintptr_t addr = ((uintptr_t)t << 40) | ((uintptr_t)i << 4);
		struct mt_ptr e = {.addr = addr, .size = 16, .stack = id, .kind = MT_HEAP};
		struct mt_ptr old;
		if (mt_ptrtab_put(&e, &old) == 0)
			mt_site_alloc(id, MT_HEAP, 16, 1);
		if (i % 2) { /* free every other block */
			struct mt_ptr got;
			uintptr_t prev = ((uintptr_t)t << 40) | ((uintptr_t)(i - 1) << 4);
			if (mt_ptrtab_take(prev, &got))
				mt_site_free(got.stack, MT_HEAP, (int64_t)got.size, 1);
		}
		if (i % 1000 == 0) {
			struct mt_map m = {.start = ((uintptr_t)t << 36) + (uintptr_t)i * 8192,
					   .end = ((uintptr_t)t << 36) + (uintptr_t)i * 8192 + 8192,
					   .stack = id, .kind = MT_MMAP, .counted = 1};
			mt_maptab_add(&m);
		}
	}
	return NULL;
}

TEST(concurrent_tables) {
	pthread_t th[NT];
	for (long t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, worker, (void *)(t + 1));
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	/* 300 distinct stacks per thread (the thread is in the frames) */
	EXPECT(mt_stack_count() == MT_NKINDS + NT * 300);
	int64_t live = 0, allocs = 0;
	for (uint32_t id = MT_NKINDS; id < mt_stack_count(); id++) {
		live += mt_site_live_count(mt_site_get(id, MT_HEAP));
		allocs += (int64_t)mt_site_get(id, MT_HEAP)->allocs;
	}
	/* heap blocks, plus the mappings charged to the same sites */
	EXPECT(allocs == (int64_t)NT * N + NT * (N / 1000));
	EXPECT(live == (int64_t)NT * N / 2 + NT * (N / 1000));
	EXPECT(mt_ptrtab_count() == (uint64_t)NT * N / 2);
	EXPECT(mt_maptab_count() == (uint64_t)NT * (N / 1000));
	struct mt_ptr got;
	/* the odd blocks stay, the even ones were freed */
	EXPECT(mt_ptrtab_take(((uintptr_t)1 << 40) | ((uintptr_t)(N - 1) << 4), &got) && got.size == 16);
	EXPECT(!mt_ptrtab_take(((uintptr_t)1 << 40) | ((uintptr_t)(N - 2) << 4), &got));
}

/* A table that grew for a peak gives the memory back when the blocks
 * are freed, and keeps every entry still live through the shrink. */
static void shrink_after_peak(void) {
	enum { PEAK = 400000, KEEP = 1000 };
	uintptr_t base = (uintptr_t)9 << 40;
	uint64_t before = mt_ptrtab_memory();
	struct mt_ptr e = {.size = 24, .stack = 1, .kind = MT_HEAP}, old, got;
	for (long i = 0; i < PEAK; i++) {
		e.addr = base | ((uintptr_t)i << 4);
		EXPECT(mt_ptrtab_put(&e, &old) == 0);
	}
	uint64_t peak = mt_ptrtab_memory();
	EXPECT(peak >= before + (uint64_t)PEAK * sizeof(struct mt_ptr));
	long missing = 0;
	for (long i = KEEP; i < PEAK; i++)
		missing += !mt_ptrtab_take(base | ((uintptr_t)i << 4), &got);
	EXPECT(missing == 0);
	uint64_t after = mt_ptrtab_memory();
	/* 441 k entries at the peak, 41 k after (concurrent_tables left its
	 * odd blocks): the shards go from 16 k slots to 4 k */
	EXPECT(after * 3 < peak);
	for (long i = 0; i < KEEP; i++)
		missing += !(mt_ptrtab_take(base | ((uintptr_t)i << 4), &got) && got.size == 24);
	EXPECT(missing == 0);
}

int main(void) {
	mt_sites_init(1 << 16, 8);
	mt_ptrtab_init(1 << 20);
	mt_maptab_init(1 << 20);
	RUN(concurrent_tables);
	RUN(shrink_after_peak);
	return TEST_DONE();
}
