/* test_tables — the shim's tables used from 4 threads at once, outside
 * LD_PRELOAD: stack interning (lock-free lookups racing inserts and index
 * growth), call-site counters, the pointer table (shard growth, backward-
 * shift deletion, shrinking after a peak) and the map table.  Built twice by `make check`: with
 * ASan+UBSan and with TSan.  Exact figures are asserted at the end. */
#include "../test.h"
#include "platform/glue.h"
#include "state/sites.h"
#include "state/ptrtab.h"
#include "state/ptrsolo.h"
#include "state/maptab.h"
#include "platform/config.h"
#include <pthread.h>
#include <sys/resource.h>
#include <errno.h>
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
		if (mt_ptrtab_put(&e, &old, 0) == 0)
			mt_site_alloc(id, MT_HEAP, 16, 1, 0);
		if (i % 2) { /* free every other block */
			struct mt_ptr got;
			uintptr_t prev = ((uintptr_t)t << 40) | ((uintptr_t)(i - 1) << 4);
			if (mt_ptrtab_take(prev, &got, 0))
				mt_site_free(got.stack, MT_HEAP, (int64_t)got.size, 1, 0);
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

/* mt_ptrtab_find while the workers put and take: whatever it finds is a
 * whole entry (a worker's 16-byte block, a stack id given out). */
static int finding; /* atomics: the threads read it, main clears it */
static long find_bad, find_hits;
static void *finder(void *arg) {
	(void)arg;
	while (__atomic_load_n(&finding, __ATOMIC_ACQUIRE))
		for (long i = 0; i < N; i += 7) {
			struct mt_ptr got;
			uintptr_t a = ((uintptr_t)2 << 40) | ((uintptr_t)i << 4);
			if (mt_ptrtab_find(a, &got)) {
				find_hits++;
				find_bad += got.addr != a || got.size != 16 || got.kind != MT_HEAP ||
					    got.stack < MT_NKINDS || got.stack >= mt_stack_count();
			}
		}
	return NULL;
}

TEST(concurrent_tables) {
	pthread_t th[NT], fth;
	__atomic_store_n(&finding, 1, __ATOMIC_RELEASE);
	pthread_create(&fth, NULL, finder, NULL);
	for (long t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, worker, (void *)(t + 1));
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	__atomic_store_n(&finding, 0, __ATOMIC_RELEASE);
	pthread_join(fth, NULL);
	EXPECT(find_bad == 0);
	{ /* a find leaves the entry; a freed block is not found */
		struct mt_ptr f1, f2;
		uint64_t before = mt_ptrtab_count();
		uintptr_t odd = ((uintptr_t)2 << 40) | ((uintptr_t)(N - 1) << 4);
		EXPECT(mt_ptrtab_find(odd, &f1) && f1.size == 16 && mt_ptrtab_find(odd, &f2) &&
		       f2.stack == f1.stack);
		EXPECT(!mt_ptrtab_find(((uintptr_t)2 << 40) | ((uintptr_t)(N - 2) << 4), &f1));
		EXPECT(mt_ptrtab_count() == before);
	}
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
	EXPECT(mt_ptrtab_take(((uintptr_t)1 << 40) | ((uintptr_t)(N - 1) << 4), &got, 0) && got.size == 16);
	EXPECT(!mt_ptrtab_take(((uintptr_t)1 << 40) | ((uintptr_t)(N - 2) << 4), &got, 0));
	/* an address no compact slot holds (not 8-aligned): the wide table */
	struct mt_ptr w = {.addr = ((uintptr_t)5 << 40) | 4, .size = 3, .stack = MT_NKINDS, .kind = MT_HEAP}, old;
	EXPECT(mt_ptrtab_put(&w, &old, 0) == 0);
	EXPECT(mt_ptrtab_find(w.addr, &got) && got.size == 3 && got.addr == w.addr);
	EXPECT(mt_ptrtab_take(w.addr, &got, 0) && !mt_ptrtab_find(w.addr, &got));
}

/* n blocks like *e at base | i << shift; how many puts failed. */
static long
put_blocks(struct mt_ptr *e, uintptr_t base, int shift, long n) {
	struct mt_ptr old;
	long failed = 0;
	for (long i = 0; i < n; i++) {
		e->addr = base | ((uintptr_t)i << shift);
		failed += mt_ptrtab_put(e, &old, 0) != 0;
	}
	return failed;
}

/* A table that grew for a peak gives the memory back when the blocks
 * are freed, and keeps every entry still live through the shrink. */
static void shrink_after_peak(void) {
	enum { PEAK = 400000, KEEP = 1000 };
	uintptr_t base = (uintptr_t)9 << 40;
	uint64_t before = mt_ptrtab_memory();
	struct mt_ptr e = {.size = 24, .stack = 1, .kind = MT_HEAP}, got;
	EXPECT(put_blocks(&e, base, 4, PEAK) == 0);
	uint64_t peak = mt_ptrtab_memory();
	EXPECT(peak >= before + (uint64_t)PEAK * 16); /* a compact slot a block, at most half full */
	long missing = 0;
	for (long i = KEEP; i < PEAK; i++)
		missing += !mt_ptrtab_take(base | ((uintptr_t)i << 4), &got, 0);
	EXPECT(missing == 0);
	uint64_t after = mt_ptrtab_memory();
	/* 441 k entries at the peak, 41 k after (concurrent_tables left its
	 * odd blocks): the shards go from 16 k slots to 4 k */
	EXPECT(after * 3 < peak);
	for (long i = 0; i < KEEP; i++)
		missing += !(mt_ptrtab_take(base | ((uintptr_t)i << 4), &got, 0) && got.size == 24);
	EXPECT(missing == 0);
}

/* Every field comes back as it went in, in the compact slot (host heap
 * blocks) and in the wide one (what does not fit: CUDA keys with tags,
 * device, stream and flags, 4 GiB and more, addresses of 2^47 and above
 * or not 8-aligned); a stale entry is replaced across the two. */
static void
fields_round_trip(void) {
	struct mt_ptr in[] = {
		{.addr = 0x7ffe12345670, .size = 0xfffffffful, .stack = (1u << 22) - 1,
		 .time_ms = 123456, .kind = MT_HEAP, .sampled = 1},
		{.addr = 0x10, .size = 1, .stack = 5, .time_ms = 8, .kind = MT_HEAP},
		{.addr = 0x555500001000, .size = 1ull << 32, .stack = 7, .time_ms = 9, .kind = MT_HEAP},
		{.addr = 0x555500002004, .size = 3, .stack = 8, .time_ms = 10, .kind = MT_HEAP},
		{.addr = 0x7f0000000000 | MT_TAG_DEV, .size = 1ull << 36, .stack = 9, .time_ms = 11,
		 .kind = MT_CUDA, .device = 3, .flags = MT_PTR_MAPPED, .stream = 77},
		{.addr = 42 | MT_TAG_HANDLE, .size = 2 << 20, .stack = 10, .time_ms = 12,
		 .kind = MT_CUDA, .flags = MT_PTR_HANDLE},
		{.addr = 0x1000000000000000ull, .size = 64, .stack = 11, .time_ms = 13, .kind = MT_HEAP},
		{.addr = 0xff0000001000ull, .size = 64, .stack = 12, .time_ms = 14, .kind = MT_HEAP},
	};
	int n = (int)(sizeof in / sizeof *in);
	uint64_t count0 = mt_ptrtab_count();
	struct mt_ptr old, got;
	for (int i = 0; i < n; i++)
		EXPECT(mt_ptrtab_put(&in[i], &old, 0) == 0);
	EXPECT(mt_ptrtab_count() == count0 + (uint64_t)n);
	for (int i = 0; i < n; i++) {
		struct mt_ptr want = in[i];
		if (want.kind == MT_HEAP && !(want.addr & 7) && want.size < (1ull << 32) &&
		    want.addr < (1ull << 47))
			want.time_ms &= ~7u; /* compact: 8 ms units */
		EXPECT(mt_ptrtab_take(in[i].addr, &got, 0) && !memcmp(&got, &want, sizeof got));
		EXPECT(!mt_ptrtab_take(in[i].addr, &got, 0));
	}
	/* a stale compact entry replaced by a wide one and back */
	struct mt_ptr small = {.addr = 0x6000, .size = 10, .stack = 3, .kind = MT_HEAP};
	struct mt_ptr big = {.addr = 0x6000, .size = 5ull << 32, .stack = 4, .kind = MT_HEAP};
	EXPECT(mt_ptrtab_put(&small, &old, 0) == 0);
	EXPECT(mt_ptrtab_put(&big, &old, 0) == EEXIST && old.size == 10 && old.stack == 3);
	EXPECT(mt_ptrtab_put(&small, &old, 0) == EEXIST && old.size == 5ull << 32 && old.stack == 4);
	EXPECT(mt_ptrtab_count() == count0 + 1);
	EXPECT(mt_ptrtab_take(0x6000, &got, 0) && got.size == 10 && !mt_ptrtab_take(0x6000, &got, 0));
	EXPECT(mt_ptrtab_count() == count0);
}

/* The solo forms (the hot path's put and take of a host heap block):
 * what they put, the general take gives back, field for field, and the
 * reverse (the solo take fills what uncharging a heap block reads:
 * address, size, stack, kind, sampled); every case they leave to the general forms (an entry that
 * does not fit a compact slot, a stale entry at the address, a table
 * without room) returns 0 having changed nothing. */
static void
solo_forms(void) {
	uint64_t count0 = mt_ptrtab_count();
	struct mt_ptr old, got;
	const uintptr_t base = (uintptr_t)30 << 40;
	for (uintptr_t i = 0; i < 1000; i++) {
		uintptr_t a = base + i * 48;
		uint32_t stack = (uint32_t)(i * 4099 % (1u << 22));
		int ok = mt_ptrtab_put_solo(a, 16 + i, stack, (uint32_t)(i * 8), (int)(i & 1),
					    mt_ptrtab_prefetch(a));
		if (!ok) /* no table yet in that shard, or one without room: the general put */
			EXPECT(mt_ptrtab_put(&(struct mt_ptr){.addr = a, .size = 16 + i, .stack = stack,
							      .time_ms = (uint32_t)(i * 8), .kind = MT_HEAP,
							      .sampled = (uint8_t)(i & 1)},
					     &old, 1) == 0);
	}
	EXPECT(mt_ptrtab_count() == count0 + 1000);
	long wrong = 0, solo = 0;
	for (uintptr_t i = 0; i < 1000; i++) {
		uintptr_t a = base + i * 48;
		struct mt_ptr e;
		memset(&e, 0xff, sizeof e);
		if (i & 2) { /* the general take of a solo put */
			wrong += !mt_ptrtab_take(a, &e, 1) || e.time_ms != i * 8 || e.device || e.flags;
		} else if (mt_ptrtab_take_solo(a, &e, mt_ptrtab_prefetch(a))) {
			solo++;
		} else {
			wrong += !mt_ptrtab_take(a, &e, 1) || e.device || e.flags;
		}
		wrong += e.addr != a || e.size != 16 + i || e.stack != i * 4099 % (1u << 22) ||
			 e.kind != MT_HEAP || e.sampled != (i & 1);
	}
	EXPECT(wrong == 0);
	EXPECT(solo > 0);
	EXPECT(mt_ptrtab_count() == count0);
	/* left to the general forms */
	uintptr_t a = base + 16;
	EXPECT(!mt_ptrtab_put_solo(a, 1ull << 32, 1, 0, 0, mt_ptrtab_prefetch(a))); /* size */
	EXPECT(!mt_ptrtab_put_solo(a, 8, 1u << 22, 0, 0, mt_ptrtab_prefetch(a)));  /* stack */
	EXPECT(!mt_ptrtab_put_solo(a + 4, 8, 1, 0, 0, mt_ptrtab_prefetch(a + 4))); /* aligned */
	EXPECT(mt_ptrtab_count() == count0);
	struct mt_ptr e = {.addr = a, .size = 8, .stack = 2, .kind = MT_HEAP};
	EXPECT(mt_ptrtab_put(&e, &old, 1) == 0);
	EXPECT(!mt_ptrtab_put_solo(a, 9, 3, 0, 0, mt_ptrtab_prefetch(a))); /* stale */
	EXPECT(mt_ptrtab_count() == count0 + 1);
	EXPECT(!mt_ptrtab_take_solo(a + 48, &got, mt_ptrtab_prefetch(a + 48))); /* absent */
	EXPECT(mt_ptrtab_take(a, &got, 1) && got.size == 8 && got.stack == 2);
	EXPECT(mt_ptrtab_count() == count0);
}

/* A dump (mt_ptrtab_each) gives a compact entry's time as the latest
 * before now with its stored bits: exact to 8 ms while the block is
 * younger than 24.8 days. */
static void
count_time(const struct mt_ptr *e, void *arg) {
	if (e->addr == 0x7000)
		*(uint32_t *)arg = e->time_ms;
}
static void
dump_time(void) {
	uint64_t now = mt_ms_since_start();
	struct mt_ptr e = {.addr = 0x7000, .size = 1, .stack = 2, .kind = MT_HEAP,
			   .time_ms = (uint32_t)now}, old, got;
	EXPECT(mt_ptrtab_put(&e, &old, 0) == 0);
	uint32_t t = ~0u;
	mt_ptrtab_each(count_time, &t);
	EXPECT(t <= now && now - t < 8);
	EXPECT(mt_ptrtab_take(0x7000, &got, 0));
}

/* What a live block costs at a million: the bench's figure, here exact
 * (the tables' own bytes, not the process's). */
static void
bytes_per_block(void) {
	enum { M = 1000000 };
	uintptr_t base = (uintptr_t)11 << 40;
	uint64_t before = mt_ptrtab_memory();
	struct mt_ptr e = {.size = 40, .stack = 6, .kind = MT_HEAP}, got;
	EXPECT(put_blocks(&e, base, 5, M) == 0);
	uint64_t per = (mt_ptrtab_memory() - before) / M;
	EXPECT(per <= 36);
	for (long i = 0; i < M; i++)
		mt_ptrtab_take(base | ((uintptr_t)i << 5), &got, 0);
}

/* m blocks at base | i << 4 (one 64 MiB region: one group of 8 shards),
 * each with its own size and stack, all put; 7 in 8 taken (the tables
 * shrink), then the rest; each must come back with its fields.  Failures
 * and misses; *peak_bytes: the tables' memory at the peak over before. */
static long
grow_and_shrink(uintptr_t base, long m, uint64_t *peak_bytes) {
	uint64_t before = mt_ptrtab_memory(), count0 = mt_ptrtab_count();
	struct mt_ptr e = {.kind = MT_HEAP}, old, got;
	long bad = 0;
	for (long i = 0; i < m; i++) {
		e.addr = base | (uintptr_t)i << 4;
		e.size = (uint64_t)i;
		e.stack = (uint32_t)i;
		bad += mt_ptrtab_put(&e, &old, 0) != 0;
	}
	bad += mt_ptrtab_count() != count0 + (uint64_t)m;
	*peak_bytes = mt_ptrtab_memory() - before;
	for (int pass = 0; pass < 2; pass++)
		for (long i = 0; i < m; i++)
			if ((i % 8 != 0) == (pass == 0))
				bad += !(mt_ptrtab_take(base | (uintptr_t)i << 4, &got, 0) &&
					 got.size == (uint64_t)i && got.stack == (uint32_t)i);
	bad += mt_ptrtab_count() != count0;
	return bad;
}

/* The process's address space (VmSize), in bytes. */
static uint64_t
vm_size(void) {
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	uint64_t kb = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmSize: %lu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* Address space an empty table takes for its first block (*first) and
 * for 40 k blocks in one region (one group of 8 shards, 5 k entries each:
 * tables of 256 KiB). */
static uint64_t
table_space(uint64_t *first) {
	mt_ptrtab_postfork_child(1); /* every table dropped: new ones are made */
	mt_ptrtab_init(1 << 22, 0);
	uintptr_t base = (uintptr_t)15 << 40;
	struct mt_ptr e = {.size = 1, .kind = MT_HEAP}, old, got;
	uint64_t vm = vm_size();
	long bad = 0;
	for (long i = 0; i < 40000; i++) {
		e.addr = base | (uintptr_t)i << 4;
		bad += mt_ptrtab_put(&e, &old, 0) != 0;
		if (i == 0)
			*first = vm_size() - vm;
	}
	uint64_t grew = vm_size() - vm;
	for (long i = 0; i < 40000; i++)
		bad += !mt_ptrtab_take(base | (uintptr_t)i << 4, &got, 0);
	EXPECT(bad == 0);
	return grew;
}

/* The compact tables double and halve in place (ptrmem.c, tab_rehash):
 * 1.2 M blocks in one region fill its group's 8 shards past their 4 MiB
 * reservations (128 Ki entries a shard) and into mappings of their own
 * (mremap); every block comes back with its fields after the doublings
 * and the shrinks, and the memory with them.  Then the same without
 * reservations (a process with an address-space limit: a table takes
 * only its own pages of it, and grows by mremap).  A small table takes
 * no reservation: a program with few blocks keeps its address space. */
TEST(rehash_in_place) {
	uint64_t before = mt_ptrtab_memory(), peak;
	EXPECT(grow_and_shrink((uintptr_t)13 << 40 | (uintptr_t)5 << 26, 1200000, &peak) == 0);
	EXPECT(peak >= 1200000ull * 16 * 2 && peak <= 1200000ull * 16 * 4 + (1 << 20));
	/* shrunk to their least (MIN_SLOTS, 256 slots) but what was there */
	EXPECT(mt_ptrtab_memory() <= before + 8 * 256 * 16);
	struct rlimit as, lim;
	getrlimit(RLIMIT_AS, &as);
	lim = as;
	lim.rlim_cur = RLIM_INFINITY - 1; /* finite, and too high to matter (ASan, TSan) */
	EXPECT(setrlimit(RLIMIT_AS, &lim) == 0);
	uint64_t first;
	EXPECT(table_space(&first) < (8 << 20) && first < (1 << 20));
	EXPECT(grow_and_shrink((uintptr_t)14 << 40 | (uintptr_t)2 << 26, 300000, &peak) == 0);
	EXPECT(peak >= 300000ull * 16 * 2);
	setrlimit(RLIMIT_AS, &as);
	EXPECT(table_space(&first) >= (32 << 20) && first < (1 << 20)); /* 8 reservations */
}

/* Blocks of the main heap (above the break the table saw) hash over all
 * 64 shards, so their tables stay even wherever the heap lies: 1 M
 * blocks 48 bytes apart, 60% of them below a 64 MiB boundary and 40%
 * above, cost what blocks in one region cost.  (By region they would
 * fall in two groups of unequal tables: ~50 bytes a block.) */
TEST(main_heap_even) {
	enum { M = 1000000 };
	uintptr_t edge = (mt_ptr_brk + (3ull << 26)) & ~((1ull << 26) - 1);
	uintptr_t base = edge - (uintptr_t)M * 48 * 6 / 10;
	uint64_t before = mt_ptrtab_memory();
	struct mt_ptr e = {.size = 40, .stack = 6, .kind = MT_HEAP}, old, got;
	long failed = 0;
	for (long i = 0; i < M; i++) {
		e.addr = base + (uintptr_t)i * 48;
		failed += mt_ptrtab_put(&e, &old, 0) != 0;
	}
	EXPECT(failed == 0);
	uint64_t per = (mt_ptrtab_memory() - before) / M;
	EXPECT(per <= 36);
	long missing = 0;
	for (long i = 0; i < M; i++)
		missing += !mt_ptrtab_take(base + (uintptr_t)i * 48, &got, 0);
	EXPECT(missing == 0);
}

/* The sampling filter: 4 threads put and take blocks whose filter slots
 * share bitmap words; a block just put always reads "maybe" (a lost
 * update of a shared word would hide it, and its free would be missed),
 * and once every block is out no bit is left set for them. */
static long filter_misses;
static void *filter_worker(void *arg) {
	long t = (long)arg, miss = 0;
	struct mt_ptr e = {.size = 8, .stack = 2, .kind = MT_HEAP}, old, got;
	for (long i = 0; i < 50000; i++) {
		e.addr = ((uintptr_t)(20 + t) << 40) | ((uintptr_t)i << 4);
		if (mt_ptrtab_put(&e, &old, 0) != 0)
			miss++;
		miss += !mt_ptrtab_maybe(e.addr);
		if (i >= 100) { /* 100 live a thread */
			uintptr_t a = ((uintptr_t)(20 + t) << 40) | ((uintptr_t)(i - 100) << 4);
			miss += !mt_ptrtab_maybe(a) || !mt_ptrtab_take(a, &got, 0);
		}
	}
	for (long i = 49900; i < 50000; i++)
		miss += !mt_ptrtab_take(((uintptr_t)(20 + t) << 40) | ((uintptr_t)i << 4), &got, 0);
	__atomic_add_fetch(&filter_misses, miss, __ATOMIC_RELAXED);
	return NULL;
}

static void
sampling_filter(void) {
	mt_ptrtab_init(1 << 22, 1);
	uint64_t count0 = mt_ptrtab_count();
	pthread_t th[NT];
	for (long t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, filter_worker, (void *)t);
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	EXPECT(filter_misses == 0);
	EXPECT(mt_ptrtab_count() == count0);
	/* the table's earlier entries were put before the filter: only the
	 * workers' ones count, and they are all out (but for those that share
	 * the slot held for NULL) */
	long set = 0;
	for (long t = 0; t < NT; t++)
		for (long i = 0; i < 50000; i += 7) {
			uintptr_t a = ((uintptr_t)(20 + t) << 40) | ((uintptr_t)i << 4);
			if (mt_ptr_filter_slot(a) != mt_ptr_filter_slot(0))
				set += mt_ptrtab_maybe(a);
		}
	EXPECT(set == 0);
	/* held slots (NULL's, the hooks' pool) stay set whatever goes in and
	 * out of them, so a free's look at the filter alone never passes them
	 * to the real allocator */
	static char held[4096] __attribute__((aligned(16)));
	mt_ptrtab_filter_hold((uintptr_t)held, (uintptr_t)held + sizeof held);
	struct mt_ptr e = {.addr = (uintptr_t)held + 64, .size = 8, .stack = 2, .kind = MT_HEAP}, old, got;
	EXPECT(mt_ptrtab_put(&e, &old, 0) == 0 && mt_ptrtab_take(e.addr, &got, 0));
	long clear = !mt_ptrtab_maybe(0);
	for (uintptr_t a = (uintptr_t)held; a < (uintptr_t)held + sizeof held; a += 16)
		clear += !mt_ptrtab_maybe(a);
	EXPECT(clear == 0);
}

/* One-frame stacks through the per-thread cache (mt_stack_intern1): 3000
 * frames, many to each of its 128 entries, in two kinds and with and
 * without a Python stack, asked three times each from 4 threads: always
 * the id the general path gives. */
static long intern1_wrong;

static void *
intern1_worker(void *arg) {
	(void)arg;
	long wrong = 0;
	for (int round = 0; round < 3; round++)
		for (uintptr_t k = 0; k < 3000; k++) {
			uintptr_t pc = 0x400000 + k * 48;
			int kind = k % 3 ? MT_HEAP : MT_MMAP;
			uint32_t py = k % 5 == 0 ? (uint32_t)k : 0;
			wrong += mt_stack_intern1(pc, kind, py) != mt_stack_intern(&pc, 1, kind, py);
		}
	__atomic_add_fetch(&intern1_wrong, wrong, __ATOMIC_RELAXED);
	return NULL;
}

TEST(one_frame_cache) {
	pthread_t th[NT];
	for (long t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, intern1_worker, (void *)t);
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	EXPECT(intern1_wrong == 0);
}

/* MEMTALLY_MAX_LIVE holds for the whole table: blocks in all 8 of the
 * shards' region groups (ptrtab.h), where each shard may hold max / 8,
 * stop between max and twice max (a table grows only while the whole
 * table holds fewer than max), not at 64 x max / 8 (all 32000 here).  Runs first, on an
 * empty table, then restores the limit the other tests use. */
TEST(live_cap) {
	enum { MAX = 4096, PER = 4000 };
	mt_ptrtab_init(MAX, 0);
	EXPECT(mt_ptrtab_count() == 0);
	struct mt_ptr e = {.size = 16, .stack = 3, .kind = MT_HEAP}, old, got;
	long failed = 0;
	for (uintptr_t g = 0; g < 8; g++)
		for (uintptr_t i = 0; i < PER; i++) {
			e.addr = (uintptr_t)1 << 40 | g << 26 | i << 4;
			failed += mt_ptrtab_put(&e, &old, 0) != 0;
		}
	uint64_t n = mt_ptrtab_count();
	EXPECT(n >= MAX && n < 2 * MAX && failed == (long)(8 * PER - n));
	for (uintptr_t g = 0; g < 8; g++)
		for (uintptr_t i = 0; i < PER; i++)
			mt_ptrtab_take((uintptr_t)1 << 40 | g << 26 | i << 4, &got, 0);
	EXPECT(mt_ptrtab_count() == 0);
	mt_ptrtab_init(1 << 22, 0);
}

/* Each thread's share of the call-site figures (sites.c): threads with
 * count slots 1..NT charge their own arrays, the first slot the shared
 * one; blocks allocated on one thread are freed on another (that share's
 * live bytes go negative), and the sums mt_site_read gives are exact.
 * The kind's peak moves between the allocations and the frees, so the
 * at-peak bytes are what the allocations left.  Last: once shares exist
 * no hook raises a site's peak (the writer's read does). */
static uint32_t share_id[2];

static void *
share_worker(void *arg) {
	long t = (long)arg; /* 1: allocates at both sites; 2: frees */
	mt_sites_thread((uint32_t)t);
	for (int i = 0; i < 1000; i++) {
		if (t == 1)
			mt_site_alloc(share_id[i & 1], MT_HEAP, 16, 1, 0);
		else if (i < 600)
			mt_site_free(share_id[i & 1], MT_HEAP, 16, 1, 0);
	}
	return NULL;
}

/* a third thread (slot 3, its own share): three big blocks at site 0,
 * then freed */
static void *
big_worker(void *arg) {
	(void)arg;
	mt_sites_thread(3);
	for (int i = 0; i < 3; i++)
		mt_site_alloc(share_id[0], MT_HEAP, MT_SITE_BIG, 1, 0);
	for (int i = 0; i < 3; i++)
		mt_site_free(share_id[0], MT_HEAP, MT_SITE_BIG, 1, 0);
	return NULL;
}

static void
share_run(long t) {
	pthread_t th;
	pthread_create(&th, NULL, share_worker, (void *)t);
	pthread_join(th, NULL);
}

TEST(thread_shares) {
	uintptr_t a = 0x51000, b = 0x52000;
	share_id[0] = mt_stack_intern(&a, 1, MT_HEAP, 0);
	share_id[1] = mt_stack_intern(&b, 1, MT_HEAP, 0);
	uint64_t before, after, x;
	mt_sites_memory(&x, &before);
	mt_sites_thread(0); /* this thread: the shared figures */
	mt_site_alloc(share_id[0], MT_HEAP, 100, 1, 0);
	share_run(1);
	mt_peak_moved(MT_HEAP);
	share_run(2);
	struct mt_site c;
	EXPECT(mt_site_read(share_id[0], MT_HEAP, &c));
	/* site 0: 100 B here, 500 x 16 from thread 1, 300 x 16 freed by thread 2 */
	EXPECT(c.allocs == 501 && c.alloc_bytes == 100 + 500 * 16 && c.frees == 300);
	EXPECT(c.live_bytes == 100 + 200 * 16 && mt_site_live_count(&c) == 201);
	EXPECT(mt_site_at_peak(&c, MT_HEAP) == 100 + 500 * 16);
	EXPECT(c.peak_bytes == 100 + 500 * 16);
	EXPECT(mt_site_get(share_id[0], MT_HEAP)->allocs == 1); /* the rest are shares */
	EXPECT(mt_site_read(share_id[1], MT_HEAP, &c));
	EXPECT(c.allocs == 500 && c.frees == 300 && c.live_bytes == 200 * 16);
	mt_sites_memory(&x, &after);
	EXPECT(after > before); /* the threads' arrays are counted */
	/* the shared array's peak once threads have shares: a small
	 * allocation raises none (the writer's read does), an allocation of
	 * MT_SITE_BIG or more raises it at once to the sum of every share */
	int64_t live0 = 100 + 200 * 16;
	mt_site_alloc(share_id[0], MT_HEAP, 4096, 1, 0);
	EXPECT(mt_site_get(share_id[0], MT_HEAP)->peak_bytes == 100 + 500 * 16);
	mt_site_free(share_id[0], MT_HEAP, 4096, 1, 0);
	mt_site_alloc(share_id[0], MT_HEAP, MT_SITE_BIG, 1, 0);
	EXPECT(mt_site_get(share_id[0], MT_HEAP)->peak_bytes == live0 + MT_SITE_BIG);
	EXPECT(mt_site_get(share_id[0], MT_HEAP)->peak_ms != 0); /* stamped */
	mt_site_free(share_id[0], MT_HEAP, MT_SITE_BIG, 1, 0);
	EXPECT(mt_site_read(share_id[0], MT_HEAP, &c) && c.live_bytes == live0 &&
	       c.peak_bytes == live0 + MT_SITE_BIG);
	/* a big one from a thread with a share of its own: the same */
	struct mt_site *g = mt_site_get(share_id[0], MT_HEAP);
	int64_t was = g->peak_bytes;
	pthread_t th;
	pthread_create(&th, NULL, big_worker, NULL);
	pthread_join(th, NULL);
	EXPECT(g->peak_bytes == live0 + 3 * (int64_t)MT_SITE_BIG && g->peak_bytes > was);
	EXPECT(mt_site_read(share_id[0], MT_HEAP, &c) && c.live_bytes == live0);
}

int main(void) {
	mt_sites_init(1 << 16, 8);
	mt_ptrtab_init(1 << 22, 0);
	mt_maptab_init(1 << 20);
	RUN(live_cap);
	RUN(concurrent_tables);
	RUN(shrink_after_peak);
	RUN(fields_round_trip);
	RUN(solo_forms);
	RUN(dump_time);
	RUN(bytes_per_block);
	RUN(main_heap_even);
	RUN(rehash_in_place);
	RUN(sampling_filter);
	RUN(one_frame_cache);
	RUN(thread_shares);
	return TEST_DONE();
}
