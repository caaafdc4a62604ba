/*
 * charge.c — the hot path's accounting (charge.h): whether to record an
 * allocation (sampling), its stack (native + Python), and charging it to
 * its call site, the totals and the pointer or map table; the reverse on
 * free.  Capture layer: calls the tables, the event ring, the stack
 * walkers and the trigger word, nothing above.
 *
 * Invariants that bind here:
 *  - Recording runs on the allocating thread with mt_self.guard set, so
 *    anything it calls that allocates (libunwind's first use, the loader)
 *    forwards straight to the real allocator, untracked.
 *  - No lock is held across a call out of the shim: the tables' locks are
 *    taken and released inside each table call.
 */
#include "platform/glue.h"
#include "capture/charge.h"
#include "platform/config.h"
#include "state/asked.h"
#include "state/events.h"
#include "state/ptrsolo.h"
#include "capture/python.h"
#include "state/sites.h"
#include "state/solo.h"
#include "state/trigger.h"
#include "capture/unwind.h"
#include <math.h>
#include <string.h>

MT_TLS struct mt_thread mt_self;
int mt_active;
int mt_host_on;
uint64_t mt_dropped_live;

static uint64_t tracked_allocs; /* for MEMTALLY_EVERY */

/* ---- sampling ---------------------------------------------------------
 * A Poisson process over allocated bytes with mean gap S = MEMTALLY_SAMPLE:
 * an allocation of z bytes is sampled with probability p = 1 - exp(-z/S)
 * and then stands for z/p bytes and 1/p allocations, so every sum over
 * call sites is an unbiased estimate (jemalloc's PROFILING_INTERNALS.md).
 * The weights are a pure function of z and S, so a free recomputes them
 * exactly and live figures return to zero. */

static uint64_t
rng_next(void) {
	uint64_t x = mt_self.rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	mt_self.rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

static int64_t
draw_gap(void) {
	double u = (double)((rng_next() >> 11) + 1) * (1.0 / 9007199254740993.0);
	double g = -mt_log(u) * (double)mt_cfg.sample;
	return g > 9e18 ? INT64_MAX : (int64_t)g + 1;
}

static void
sample_weights(uint64_t size, int64_t *bytes, int64_t *count) {
	double p = -mt_expm1(-(double)size / (double)mt_cfg.sample);
	*bytes = (int64_t)((double)size / p + 0.5);
	*count = (int64_t)(1.0 / p + 0.5);
}

int
mt_heap_sample_point(size_t size) {
	if (MT_UNLIKELY(!mt_self.seeded)) {
		static uint64_t threads_seeded;
		mt_self.seeded = 1;
		if (mt_cfg.seed) /* repeatable: the n-th thread to sample */
			mt_self.rng = (mt_cfg.seed + mt_add(&threads_seeded, 1)) *
				      0x9e3779b97f4a7c15ull;
		else
			mt_self.rng = (uint64_t)mt_sys(SYS_gettid, 0, 0, 0, 0,
						       0, 0) *
					      0x9e3779b97f4a7c15ull ^
				      mt_now_ns();
		if (!mt_self.rng)
			mt_self.rng = 1;
		mt_self.countdown = draw_gap() - (int64_t)size;
		if (mt_self.countdown > 0)
			return 0;
	}
	/* Skip every sample point this allocation covers (memorylessness). */
	do
		mt_self.countdown += draw_gap();
	while (mt_self.countdown <= 0);
	return 2;
}

/* key: the stack's kind and device (stacks.h mt_stack_key).
 * hook: the exported hook's frame pointer when it is known (heap hooks),
 * else 0.  Its return address is the first frame an unwind gives once
 * the shim's own frames are stripped: at MEMTALLY_DEPTH=1 the whole native
 * stack, without unwinding (libunwind steps through the shim's frames
 * first, ~100 ns); the CFI walker starts there. */
/* The walk and what follows it, out of line: its frame (a stack's worth
 * of return addresses) would cost a recalled capture its set-up. */
static MT_NOINLINE uint32_t
capture_walk(int key, uintptr_t hook, uint32_t py, uint64_t tag) {
	/* with a Python stack, the native stack ends at the eval loop
	 * (mt_py_cut_range: mt_unwind stops or cuts there) */
	uintptr_t pcs[MT_MAX_DEPTH], stop_lo = 0, stop_hi = 0;
	if (py)
		mt_py_cut_range(&stop_lo, &stop_hi);
	/* past the depth the walk goes on, to find the stack's outer end
	 * (unwind.h mt_unwind_deep_cut) */
	int n = mt_unwind(pcs, MT_MAX_DEPTH, mt_cfg.unwind, stop_lo, stop_hi, hook);
	int whole = n < MT_MAX_DEPTH;
	if (n > (int)mt_cfg.initdepth + 1) /* else nothing to cut */
		n = mt_unwind_loader_cut(pcs, n, (int)mt_cfg.initdepth);
	if (n > (int)mt_cfg.depth)
		n = mt_unwind_deep_cut(pcs, n, (int)mt_cfg.depth, whole);
	uint32_t id = n == 1 ? mt_stack_intern1(pcs[0], key, py) : mt_stack_intern(pcs, n, key, py);
	if (hook) /* not an id of the unknown stack: the table may have room later */
		mt_unwind_keep(tag, id >= MT_NKINDS ? id : 0);
	return id;
}

static inline __attribute__((always_inline)) uint32_t
capture(int key, uintptr_t hook) {
	/* errno: mt_unwind keeps it (libunwind may set it), and nothing else
	 * here calls libc but memcpy/memset and the vDSO clock: the hooks'
	 * callers see their own errno */
	/* the Python stack first: with one, the native stack ends at the
	 * eval loop (capture_walk; one frame needs no cut) */
	uint32_t py = mt_py_on ? mt_py_capture() : 0;
	if (hook && mt_cfg.depth == 1) /* its return address */
		return mt_stack_intern1(((const uintptr_t *)hook)[1], key, py);
	/* the same stack as a capture from here before: its id without a
	 * walk (unwind.h mt_unwind_recall; what follows the walk, the cut
	 * and the interning, is a function of the frames, key and py; so
	 * is the stop range: unwind.h) */
	uint64_t tag = (uint64_t)py << 32 | (uint32_t)key;
	uint32_t id;
	if (hook && mt_unwind_recall(hook, mt_cfg.unwind, tag, &id))
		return id;
	return capture_walk(key, hook, py, tag);
}

/* While no writer thread runs (output/writer.h: it starts when needed):
 * start it for a snapshot asked meanwhile (the signal's handler cannot
 * start a thread), once live host or device bytes pass the 4 MiB a
 * MEMTALLY_RISE snapshot needs at least, or when objects were loaded
 * while Python is looked for (an embedder's libpython: the writer finds
 * it; looked at every 64th look, about every
 * 4096th allocation).  Here no shim lock is held. */
static MT_NOINLINE void
writer_maybe(void) {
	static uint32_t tick;
	int64_t host = mt_totals[MT_HEAP].live_bytes + mt_totals[MT_MMAP].live_bytes;
	int64_t dev = mt_totals[MT_CUDA].live_bytes + mt_totals[MT_CUDA_MANAGED].live_bytes +
		      mt_totals[MT_CUDA_VMM].live_bytes;
	if (mt_trigger_pending() || (mt_cfg.rise > 0 && (host >= 4 << 20 || dev >= 4 << 20)) ||
	    (!(++tick & 63) && mt_py_loaded_since()))
		mt_trigger_start_writer();
	/* The time cadence of a process that has not needed the thread (a
	 * small program stays single-threaded): this thread writes it, looked
	 * at on each look (about every 64th allocation: a clock read). */
	else if (mt_cadence_time_due(mt_now_ns()))
		mt_trigger_sync(MT_REASON_INTERVAL);
}

/* writer_maybe's pace: each thread looks at every 64th of its tracked
 * allocations, at any of 64 KiB or more, and whenever a snapshot is
 * pending (summing the totals on every allocation was ~45 instructions
 * of exact mode's pair); below 64 KiB, 63 allocations add less than the
 * 4 MiB a rise needs. */
static MT_TLS uint32_t writer_tick;

static inline __attribute__((always_inline)) void
count_tracked(uint64_t size) {
	if (MT_UNLIKELY(!mt_writer_up()) &&
	    (size >= 65536 || !(++writer_tick & 63) || mt_trigger_pending()))
		writer_maybe();
	/* One counter all threads add to: only when MEMTALLY_EVERY needs it
	 * (its cache line bouncing between two threads was the exact malloc
	 * benchmark's hottest instruction).  The N-th allocation's thread
	 * writes the snapshot itself: one snapshot per N, of the state at
	 * that allocation (other threads go on meanwhile). */
	if (!mt_cfg.every)
		return;
	uint64_t n = mt_add(&tracked_allocs, 1);
	if (n % mt_cfg.every == 0)
		mt_trigger_sync(MT_REASON_EVERY);
}

struct mt_tcount *
mt_tslot_pick(void) {
	static uint32_t next;
	if (!mt_self.tslot) {
		uint32_t i = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
		mt_self.tslot = (i < MT_TSLOTS - 1 ? i : MT_TSLOTS - 1) + 1;
		if (i < MT_TSLOTS - 1) {
			mt_self.tc = &mt_tcounts[i];
			/* its owner, for the writer to fold its pending heap
			 * bytes once it is gone (totals.h) */
			__atomic_store_n(&mt_self.tc->owner,
					 (uint64_t)mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0) << 32 |
						 (uint32_t)mt_sys(SYS_gettid, 0, 0, 0, 0, 0, 0),
					 __ATOMIC_RELEASE);
		}
		mt_sites_thread(mt_self.tslot - 1);
	}
	return &mt_tcounts[mt_self.tslot - 1];
}

size_t mt_fast_below;

void
mt_set_active(int on) {
	int fast = on && mt_cfg.host && mt_cfg.sample && mt_ptr_filter; /* free's fast path reads it */
	__atomic_store_n(&mt_fast_below, fast ? mt_cfg.exact_above : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&mt_host_on, on && mt_cfg.host, __ATOMIC_RELEASE);
	__atomic_store_n(&mt_active, on, __ATOMIC_RELEASE);
}

/* The peak a tracked block's call site follows (stacks.h mt_peak_slot):
 * its kind's, or for memory on a GPU its device's. */
static inline int
ptr_slot(const struct mt_ptr *e) {
	return MT_LIKELY(e->kind == MT_HEAP) ? MT_HEAP : mt_peak_slot(mt_stack_key(e->kind, e->device));
}

/* The heap's live bytes change by bytes (totals.h live_pending): the
 * solo thread's plain add, a slot owner's pending (added to the shared
 * figure once it passes MT_HEAP_SLACK), or an atomic add.  Returns the
 * shared figure when it changed (its peak to be raised), else INT64_MIN. */
static inline __attribute__((always_inline)) int64_t
heap_live_add(int plain, int64_t bytes) {
	struct mt_totals *t = &mt_totals[MT_HEAP];
	if (plain)
		return mt_add_plain(&t->live_bytes, bytes);
	struct mt_tcount *tc = mt_self.tc;
	if (MT_LIKELY(tc)) {
		int64_t p = tc->live_pending + bytes;
		if (MT_LIKELY(p < MT_HEAP_SLACK && p > -MT_HEAP_SLACK)) {
			__atomic_store_n(&tc->live_pending, p, __ATOMIC_RELAXED);
			return INT64_MIN;
		}
		/* (a reader may see the bytes in both places for an instant:
		 * racy, as every figure read while threads record) */
		int64_t live = mt_add(&t->live_bytes, p);
		__atomic_store_n(&tc->live_pending, 0, __ATOMIC_RELAXED);
		return live;
	}
	return mt_add(&t->live_bytes, bytes);
}

/* plain: the solo thread's plain updates (solo.h), for heap entries only
 * (other kinds' totals are changed by any thread).  heap: the caller
 * knows e is a host heap block (inlined there, its tests folded). */
static inline __attribute__((always_inline)) void
uncharge_as(const struct mt_ptr *e, int plain, int heap) {
	int64_t bytes = (int64_t)e->size, count = 1;
	int kind = heap ? MT_HEAP : e->kind;
	plain &= kind == MT_HEAP;
	if (e->size >= mt_cfg.exact_above)
		mt_event(MT_EV_FREE, kind, e->addr, e->size, e->stack);
	if (e->sampled)
		sample_weights(e->size, &bytes, &count);
	mt_site_free(e->stack, heap ? MT_HEAP : ptr_slot(e), bytes, count, plain);
	struct mt_totals *t = &mt_totals[kind];
	if (kind == MT_HEAP) { /* per-thread: no shared cache line */
		heap_live_add(plain, -bytes);
		struct mt_tcount *tc = mt_tcount();
		mt_tc_add2(&tc->live_count, (uint64_t)-count, &tc->free_bytes, e->size);
	} else {
		mt_add(&t->live_bytes, -bytes);
		mt_add(&t->live_count, -count);
		mt_add(&t->free_bytes, e->size);
	}
}

static MT_NOINLINE void
uncharge(const struct mt_ptr *e, int plain) {
	uncharge_as(e, plain, 0);
}

/* mt_heap_track's put of anything but the solo thread's common case:
 * 1, or 0 when the table is full (the block is dropped: counted, its
 * site not charged, plain mode left). */
static MT_NOINLINE int
track_general(void *p, size_t size, uint32_t stack, uint32_t now, int how, int plain,
	      uint64_t place) {
	struct mt_ptr e = {.addr = (uintptr_t)p, .size = size, .stack = stack, .kind = MT_HEAP,
			   .sampled = how == 2, .time_ms = now};
	struct mt_ptr old;
	int err = mt_ptrtab_put_at(&e, &old, plain, place);
	if (err == ENOMEM) {
		mt_plain_leave(plain);
		mt_add(&mt_dropped_live, 1);
		return 0;
	}
	if (err == EEXIST) /* freed behind our back: forget the old one */
		uncharge(&old, plain);
	return 1;
}

/* Heap totals: allocs, alloc_bytes and frees are exact in every mode;
 * live bytes and count are exact in exact mode and estimates (the same
 * weights as the call sites) when sampling. */
void
mt_heap_track(void *p, size_t size, uintptr_t hook, int how) {
	struct mt_totals *t = &mt_totals[MT_HEAP];
	struct mt_tcount *tc = mt_tcount();
	uint64_t place = mt_ptrtab_prefetch((uintptr_t)p); /* its slot loads while we unwind */
	int64_t bytes = (int64_t)size, count = 1;
	if (how == 2)
		sample_weights(size, &bytes, &count);
	uint32_t stack = capture(MT_HEAP, hook);
	uint32_t now = (uint32_t)mt_ms_since_start();
	int plain = mt_plain_enter(); /* from here to mt_plain_leave */
	/* the solo thread's common put, else the entry whole for the general
	 * one (building it on the way was ~10 instructions of every put) */
	if (!plain || !mt_ptrtab_put_solo((uintptr_t)p, size, stack, now, how == 2, place))
		if (MT_UNLIKELY(!track_general(p, size, stack, now, how, plain, place)))
			return;
	mt_site_alloc(stack, MT_HEAP, bytes, count, plain);
	int64_t live = heap_live_add(plain, bytes);
	int peak = 0;
	if (live != INT64_MIN) {
		peak = mt_raise_peakp(plain, &t->peak_bytes, live);
		mt_since_raise(plain, MT_HEAP, live); /* memtally_figures' peaks */
	}
	mt_plain_leave(plain);
	if (size >= mt_cfg.exact_above) /* large blocks go to the event ring */
		mt_event(MT_EV_ALLOC, MT_HEAP, (uintptr_t)p, size, stack);
	mt_tc_add(&tc->live_count, (uint64_t)count);
	if (peak)
		mt_peak_moved(MT_HEAP);
	count_tracked(size);
}

void
mt_heap_free(void *p, void (*real_free)(void *)) {
	struct mt_ptr e;
	mt_tc_add(&mt_tcount()->frees, 1);
	int plain = mt_plain_enter();
	if (plain) {
		/* Solo: mt_solo.busy stays set across the real free, so a
		 * thread's first allocation waits for it in mt_solo_end; that
		 * thread holds nothing the real free needs (its own real call
		 * has returned, or not begun).  errno: free keeps it. */
		uint64_t place = mt_ptrtab_prefetch((uintptr_t)p);
		real_free(p);
		if (mt_ptrtab_take_solo((uintptr_t)p, &e, place))
			uncharge_as(&e, 1, 1); /* a host heap block (take_solo's) */
		else if (mt_ptrtab_take_at((uintptr_t)p, &e, 1, place))
			uncharge(&e, 1);
		mt_plain_leave(1);
		return;
	}
	if (mt_ptrtab_take((uintptr_t)p, &e, 0))
		uncharge(&e, 0);
	real_free(p);
}

void
mt_heap_take(void *p, struct mt_ptr *e, int *had) {
	*had = 0;
	if (!mt_ptrtab_maybe((uintptr_t)p)) /* sampling: most blocks are not held */
		return;
	int plain = mt_plain_enter();
	if (plain && mt_ptrtab_take_solo_whole((uintptr_t)p, e, mt_ptrtab_prefetch((uintptr_t)p))) {
		/* the solo thread's common take, as mt_heap_free's */
		*had = 1;
		uncharge_as(e, 1, 1);
		mt_plain_leave(1);
		return;
	}
	*had = mt_ptrtab_take((uintptr_t)p, e, plain);
	if (*had)
		uncharge(e, plain);
	mt_plain_leave(plain);
}

void
mt_heap_restore(const struct mt_ptr *e) {
	struct mt_ptr old;
	int64_t bytes = (int64_t)e->size, count = 1;
	if (mt_ptrtab_put(e, &old, 0) == ENOMEM) {
		mt_add(&mt_dropped_live, 1);
		return;
	}
	if (e->sampled)
		sample_weights(e->size, &bytes, &count);
	mt_site_unfree(e->stack, MT_HEAP, bytes, count);
	heap_live_add(0, bytes);
	struct mt_tcount *tc = mt_tcount();
	mt_tc_add2(&tc->live_count, (uint64_t)count, &tc->free_bytes, (uint64_t)-e->size);
}

int
mt_dev_track(uintptr_t key, uint64_t size, int kind, int device, uint32_t stream,
	     int flags, uint32_t stack) {
	struct mt_ptr e = {.addr = key, .size = size,
			   .stack = stack ? stack : capture(mt_stack_key(kind, device), 0),
			   .kind = (uint8_t)kind,
			   .device = (uint8_t)device, .flags = (uint8_t)flags,
			   .stream = stream,
			   .time_ms = (uint32_t)mt_ms_since_start()};
	struct mt_ptr old;
	int err = mt_ptrtab_put(&e, &old, 0);
	if (err == ENOMEM) {
		mt_add(&mt_dropped_live, 1);
		return -1;
	}
	if (err == EEXIST && !(old.flags & MT_PTR_MAPPED))
		uncharge(&old, 0);
	if (!(flags & MT_PTR_MAPPED)) { /* a mapping of a handle: charged at create */
		mt_site_alloc(e.stack, ptr_slot(&e), (int64_t)size, 1, 0);
		mt_totals_alloc(kind, size);
		count_tracked(size);
	}
	mt_event(MT_EV_ALLOC, kind, key & ~MT_TAG_MASK, size, e.stack);
	return (int)e.stack;
}

int
mt_dev_untrack(uintptr_t key, struct mt_ptr *e) {
	if (!mt_ptrtab_take(key, e, 0))
		return 0;
	if (!(e->flags & MT_PTR_MAPPED)) {
		mt_site_free(e->stack, ptr_slot(e), (int64_t)e->size, 1, 0);
		mt_totals_free(e->kind, e->size, 1);
	}
	mt_event(MT_EV_FREE, e->kind, key & ~MT_TAG_MASK, e->size, e->stack);
	return 1;
}

uint32_t
mt_capture(int key) {
	return capture(key, 0);
}

void
mt_map_add(void *p, size_t len, int file, uint32_t stack) {
	struct mt_map m = {.start = (uintptr_t)p,
			   .end = (uintptr_t)p + ((len + 4095) & ~(size_t)4095),
			   .stack = stack ? stack : capture(file ? MT_MMAP_FILE : MT_MMAP, 0),
			   .kind = file ? MT_MMAP_FILE : MT_MMAP,
			   .counted = 1,
			   .time_ms = (uint32_t)mt_ms_since_start()};
	if (mt_maptab_add(&m)) {
		mt_add(&mt_dropped_live, 1);
	} else {
		mt_event(MT_EV_ALLOC, m.kind, m.start, m.end - m.start, m.stack);
		count_tracked(m.end - m.start);
		if (len & 4095) /* what was asked, beside the pages mapped */
			mt_asked_note(m.stack, m.kind, (m.end - m.start) - len);
	}
}

void
mt_map_reserve(void *p, size_t len) {
	struct mt_map m = {.start = (uintptr_t)p,
			   .end = (uintptr_t)p + ((len + 4095) & ~(size_t)4095),
			   .stack = capture(MT_MMAP, 0), .kind = MT_MMAP, .counted = 1, .reserved = 1,
			   .time_ms = (uint32_t)mt_ms_since_start()};
	if (mt_maptab_add(&m))
		mt_add(&mt_dropped_live, 1);
}

void
mt_map_protect(void *p, size_t len, int accessible) {
	uintptr_t s = (uintptr_t)p & ~(uintptr_t)4095;
	uintptr_t e = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;
	struct mt_map was;
	if (!mt_maptab_find(s, e, &was) || was.kind != MT_MMAP || was.reserved != accessible)
		return; /* nothing tracked, or no change between memory and address space */
	mt_maptab_release(s, e, NULL);
	struct mt_map m = {.start = s, .end = e, .stack = was.stack, .kind = MT_MMAP, .counted = 1,
			   .reserved = !accessible, .time_ms = (uint32_t)mt_ms_since_start()};
	if (mt_maptab_add(&m))
		mt_add(&mt_dropped_live, 1);
	else if (accessible)
		mt_event(MT_EV_ALLOC, MT_MMAP, s, e - s, m.stack);
}

void
mt_map_release(void *p, size_t len, struct mt_map *first) {
	uintptr_t s = (uintptr_t)p & ~(uintptr_t)4095;
	uintptr_t e = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;
	if (first)
		memset(first, 0, sizeof *first);
	mt_event(MT_EV_FREE, MT_MMAP, s, e - s, 0);
	mt_maptab_release(s, e, first);
}

void
mt_charge_postfork_child(int follow) {
	(void)follow;
	tracked_allocs = 0;
	mt_dropped_live = 0;
}
