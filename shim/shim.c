/*
 * shim.c — the core between hooks and tables: the constructor, sampling,
 * stack capture and charging, snapshot triggers and the writer thread,
 * fork and exit.  Hooks live in interpose.c and signal.c; record formats
 * in snapshot.c; the tables in sites.c, ptrtab.c and maptab.c.
 *
 * Invariants that bind here:
 *  - Recording runs on the allocating thread with mt_self.guard set, so
 *    anything it calls that allocates (libunwind's first use, the loader)
 *    forwards straight to the real allocator, untracked.
 *  - No lock is held across a call out of the shim; the writer lock is
 *    held only by the writer thread and the exiting thread while writing.
 *  - Snapshots are written by the writer thread (started with every signal
 *    blocked), never by an allocating thread or a signal handler, except
 *    the final one, written by the thread that runs exit().
 */
#include "glue.h"
#include "shim.h"
#include "buf.h"
#include "config.h"
#include "sites.h"
#include "snapshot.h"
#include "unwind.h"
#include "oom.h"
#include "procstat.h"
#include "cuda.h"
#include "python.h"
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

MT_TLS struct mt_thread mt_self;
int mt_active;
uint64_t mt_start_mono_ns, mt_start_wall_ns;
uint64_t mt_dropped_live;

static uint64_t tracked_allocs; /* for MEMTALLY_EVERY */
static uint32_t wake_word;      /* futex: bumped by every trigger */
static int pending;             /* MT_REASON_* bits not yet written */
static uint32_t done_word;      /* futex: bumped after each snapshot */
static int writer_running;
static uint32_t req_ticket;     /* requests taken (C API) */
static uint32_t req_served;     /* requests covered by a written snapshot */
/* A request's label travels with its ticket: both change under req_lock,
 * and the writer takes them together before it writes, so a label set
 * while another snapshot is being written names the next one (found by
 * test_stress under CI: a signal snapshot in flight cleared "end").  The
 * lock is held for a 128-byte copy only, never across a call out. */
static mt_lock_t req_lock;
static char req_label[128];
static int initialised;
static long mt_pid;             /* ours; a vfork child has another */

uint64_t
mt_ms_since_start(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* vDSO, ~8 ns here */
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return now > mt_start_mono_ns ? (now - mt_start_mono_ns) / 1000000u : 0;
}

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
	double g = -log(u) * (double)mt_cfg.sample;
	return g > 9e18 ? INT64_MAX : (int64_t)g + 1;
}

static void
sample_weights(uint64_t size, int64_t *bytes, int64_t *count) {
	double p = -expm1(-(double)size / (double)mt_cfg.sample);
	*bytes = (int64_t)((double)size / p + 0.5);
	*count = (int64_t)(1.0 / p + 0.5);
}

/* Returns 0 (not sampled), 1 (exact) or 2 (weighted sample). */
static inline int
should_track(size_t size) {
	if (!mt_cfg.sample || size >= mt_cfg.exact_above)
		return 1;
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
		mt_self.countdown = draw_gap();
	}
	mt_self.countdown -= (int64_t)size;
	if (mt_self.countdown > 0)
		return 0;
	/* Skip every sample point this allocation covers (memorylessness). */
	do
		mt_self.countdown += draw_gap();
	while (mt_self.countdown <= 0);
	return 2;
}

static uint32_t
capture(int kind) {
	uintptr_t pcs[128];
	int n = mt_unwind(pcs, (int)mt_cfg.depth, mt_cfg.unwind);
	return mt_stack_intern(pcs, n, kind, mt_py_capture());
}

static void
count_tracked(void) {
	uint64_t n = mt_add(&tracked_allocs, 1);
	if (mt_cfg.every && n % mt_cfg.every == 0)
		mt_trigger(MT_REASON_EVERY);
}

/* Each of the first MT_TSLOTS - 1 threads owns a slot and bumps its
 * counters with plain (relaxed, non-atomic read-modify-write) stores: one
 * writer, racy readers.  Later threads share the last slot with atomic
 * adds.  Either way the sums are exact. */
static inline struct mt_tcount *
tcount(void) {
	if (MT_UNLIKELY(!mt_self.tslot)) {
		static uint32_t next;
		uint32_t i = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
		mt_self.tslot = (i < MT_TSLOTS - 1 ? i : MT_TSLOTS - 1) + 1;
	}
	return &mt_tcounts[mt_self.tslot - 1];
}

static inline void
tc_add(uint64_t *c, uint64_t v) {
	if (MT_LIKELY(mt_self.tslot < MT_TSLOTS))
		__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
	else
		mt_add(c, v);
}

static void
uncharge(const struct mt_ptr *e) {
	int64_t bytes = (int64_t)e->size, count = 1;
	if (e->size >= mt_cfg.exact_above)
		mt_event(MT_EV_FREE, e->kind, e->addr, e->size, e->stack);
	if (e->sampled)
		sample_weights(e->size, &bytes, &count);
	mt_site_free(e->stack, e->kind, bytes, count);
	struct mt_totals *t = &mt_totals[e->kind];
	mt_add(&t->live_bytes, -bytes);
	if (e->kind == MT_HEAP) { /* per-thread: no shared cache line */
		struct mt_tcount *tc = tcount();
		tc_add(&tc->live_count, (uint64_t)-count);
		tc_add(&tc->free_bytes, e->size);
	} else {
		mt_add(&t->live_count, -count);
		mt_add(&t->free_bytes, e->size);
	}
}

/* When sampling, most blocks are never tracked, and a free would look
 * for each in the pointer table (a shard lock and a probe).  A counting
 * filter by address answers "certainly not tracked" first: a counter is
 * raised before an entry goes in and lowered after it comes out, so a free
 * (which follows its allocation) never misses a tracked block.  Counters
 * that reach their maximum stay there.  Exact mode has no filter. */
#define FILTER_BITS 16 /* 64 KiB of 8-bit counters: stays in L2 (a 2 MiB one cost a cache miss a free) */
static uint8_t *maybe;

static inline uint8_t *
filter_at(uintptr_t a) {
	return &maybe[((uint64_t)(a >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - FILTER_BITS)];
}

static inline void
filter_add(uintptr_t a) {
	if (maybe) {
		uint8_t *c = filter_at(a);
		if (__atomic_load_n(c, __ATOMIC_RELAXED) != 0xff)
			__atomic_add_fetch(c, 1, __ATOMIC_RELEASE);
	}
}

static inline void
filter_del(uintptr_t a) {
	if (maybe) {
		uint8_t *c = filter_at(a);
		if (__atomic_load_n(c, __ATOMIC_RELAXED) != 0xff)
			__atomic_sub_fetch(c, 1, __ATOMIC_RELEASE);
	}
}

static inline int
filter_maybe(uintptr_t a) {
	return !maybe || __atomic_load_n(filter_at(a), __ATOMIC_ACQUIRE) != 0;
}

/* Heap totals: allocs, alloc_bytes and frees are exact in every mode;
 * live bytes and count are exact in exact mode and estimates (the same
 * weights as the call sites) when sampling. */
void
mt_heap_alloc(void *p, size_t size) {
	struct mt_totals *t = &mt_totals[MT_HEAP];
	int how = should_track(size);
	struct mt_tcount *tc = tcount();
	tc_add(&tc->allocs, 1);
	tc_add(&tc->alloc_bytes, size);
	if (!how)
		return;
	int64_t bytes = (int64_t)size, count = 1;
	if (how == 2)
		sample_weights(size, &bytes, &count);
	struct mt_ptr e = {.addr = (uintptr_t)p, .size = size,
			   .stack = capture(MT_HEAP), .kind = MT_HEAP,
			   .sampled = how == 2,
			   .time_ms = (uint32_t)mt_ms_since_start()};
	struct mt_ptr old;
	filter_add(e.addr);
	int err = mt_ptrtab_put(&e, &old);
	if (err == ENOMEM) {
		filter_del(e.addr);
		mt_add(&mt_dropped_live, 1);
		return;
	}
	if (err == EEXIST) { /* freed behind our back: forget the old one */
		filter_del(e.addr); /* one entry for the address, not two */
		uncharge(&old);
	}
	mt_site_alloc(e.stack, MT_HEAP, bytes, count);
	if (size >= mt_cfg.exact_above) /* large blocks go to the event ring */
		mt_event(MT_EV_ALLOC, MT_HEAP, (uintptr_t)p, size, e.stack);
	tc_add(&tc->live_count, (uint64_t)count);
	int64_t live = mt_add(&t->live_bytes, bytes);
	int64_t peak = __atomic_load_n(&t->peak_bytes, __ATOMIC_RELAXED);
	while (live > peak &&
	       !__atomic_compare_exchange_n(&t->peak_bytes, &peak, live, 1,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	count_tracked();
}

void
mt_heap_free(void *p) {
	struct mt_ptr e;
	tc_add(&tcount()->frees, 1);
	if (filter_maybe((uintptr_t)p) && mt_ptrtab_take((uintptr_t)p, &e)) {
		filter_del(e.addr);
		uncharge(&e);
	}
}

void
mt_heap_freed(void) {
	tc_add(&tcount()->frees, 1);
}

void
mt_heap_take(void *p, struct mt_ptr *e, int *had) {
	*had = filter_maybe((uintptr_t)p) && mt_ptrtab_take((uintptr_t)p, e);
	if (*had) {
		filter_del(e->addr);
		uncharge(e);
	}
}

void
mt_heap_restore(const struct mt_ptr *e) {
	struct mt_ptr old;
	int64_t bytes = (int64_t)e->size, count = 1;
	filter_add(e->addr);
	if (mt_ptrtab_put(e, &old) == ENOMEM) {
		filter_del(e->addr);
		mt_add(&mt_dropped_live, 1);
		return;
	}
	if (e->sampled)
		sample_weights(e->size, &bytes, &count);
	mt_site_unfree(e->stack, MT_HEAP, bytes, count);
	struct mt_totals *t = &mt_totals[MT_HEAP];
	mt_add(&t->live_bytes, bytes);
	tc_add(&tcount()->live_count, (uint64_t)count);
	tc_add(&tcount()->free_bytes, (uint64_t)-e->size);
}

int
mt_dev_track(uintptr_t key, uint64_t size, int kind, int device, uint32_t stream,
	     int flags, uint32_t stack) {
	struct mt_ptr e = {.addr = key, .size = size,
			   .stack = stack ? stack : capture(kind), .kind = (uint8_t)kind,
			   .device = (uint8_t)device, .flags = (uint8_t)flags,
			   .stream = stream,
			   .time_ms = (uint32_t)mt_ms_since_start()};
	struct mt_ptr old;
	int err = mt_ptrtab_put(&e, &old);
	if (err == ENOMEM) {
		mt_add(&mt_dropped_live, 1);
		return -1;
	}
	if (err == EEXIST && !(old.flags & MT_PTR_MAPPED))
		uncharge(&old);
	if (!(flags & MT_PTR_MAPPED)) { /* a mapping of a handle: charged at create */
		mt_site_alloc(e.stack, kind, (int64_t)size, 1);
		mt_totals_alloc(kind, size);
		count_tracked();
	}
	mt_event(MT_EV_ALLOC, kind, key & ~MT_TAG_MASK, size, e.stack);
	return (int)e.stack;
}

int
mt_dev_untrack(uintptr_t key, struct mt_ptr *e) {
	if (!mt_ptrtab_take(key, e))
		return 0;
	if (!(e->flags & MT_PTR_MAPPED)) {
		mt_site_free(e->stack, e->kind, (int64_t)e->size, 1);
		mt_totals_free(e->kind, e->size, 1);
	}
	mt_event(MT_EV_FREE, e->kind, key & ~MT_TAG_MASK, e->size, e->stack);
	return 1;
}

uint32_t
mt_capture(int kind) {
	return capture(kind);
}

void
mt_map_add(void *p, size_t len, int file, uint32_t stack) {
	struct mt_map m = {.start = (uintptr_t)p,
			   .end = (uintptr_t)p + ((len + 4095) & ~(size_t)4095),
			   .stack = stack ? stack : capture(file ? MT_MMAP_FILE : MT_MMAP),
			   .kind = file ? MT_MMAP_FILE : MT_MMAP,
			   .counted = 1,
			   .time_ms = (uint32_t)mt_ms_since_start()};
	if (mt_maptab_add(&m)) {
		mt_add(&mt_dropped_live, 1);
	} else {
		mt_event(MT_EV_ALLOC, m.kind, m.start, m.end - m.start, m.stack);
		count_tracked();
	}
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

/* ---- triggers and the writer thread ---------------------------------- */

static long
futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts) {
	return mt_sys(SYS_futex, w, op, val, ts, 0, 0);
}

void
mt_trigger(int reason) {
	__atomic_or_fetch(&pending, reason, __ATOMIC_RELEASE);
	__atomic_add_fetch(&wake_word, 1, __ATOMIC_RELEASE);
	futex(&wake_word, FUTEX_WAKE_PRIVATE, 1, NULL);
}

static const char *
reason_name(int bits) {
	if (bits & MT_REASON_EXIT)
		return "exit";
	if (bits & MT_REASON_PREOOM)
		return "preoom";
	/* a request is waited on and carries its label: it names the
	 * snapshot even when a signal arrived at the same time */
	if (bits & MT_REASON_REQUEST)
		return "request";
	if (bits & MT_REASON_SIGNAL)
		return "signal";
	if (bits & MT_REASON_EVERY)
		return "every";
	return "interval";
}

static void *
writer_main(void *arg) {
	(void)arg;
	mt_self.guard = 1; /* this thread's own allocations are not tracked */
	uint64_t period = (uint64_t)(mt_cfg.interval * 1e9);
	uint64_t next = period ? mt_now_ns() + period : 0;
	/* Pre-OOM: the cgroup's usage is read every 100 ms (three syscalls),
	 * only when there is a limit to approach. */
	char probe[256];
	uint64_t cur, max;
	uint64_t tick = mt_cfg.preoom > 0 &&
				!mt_cgroup_usage(&cur, &max, probe, sizeof probe)
			? 100000000u
			: 0;
	uint64_t next_tick = tick ? mt_now_ns() + tick : 0;
	for (;;) {
		uint32_t w = __atomic_load_n(&wake_word, __ATOMIC_ACQUIRE);
		int bits = __atomic_exchange_n(&pending, 0, __ATOMIC_ACQ_REL);
		uint64_t now = mt_now_ns();
		if (tick && now >= next_tick) {
			next_tick = now + tick;
			if (mt_preoom_check())
				bits |= MT_REASON_PREOOM;
		}
		if (period && now >= next) {
			bits |= MT_REASON_INTERVAL;
			next += period;
			if (next <= now)
				next = now + period;
		}
		if (mt_py_waiting()) /* a libpython dlopen'ed since? */
			mt_py_init();
		if (bits & MT_REASON_RENDER) {
			mt_oom_render(0);
			bits &= ~MT_REASON_RENDER;
		}
		if (bits) {
			char lab[sizeof req_label];
			mt_lock(&req_lock);
			uint32_t serving =
				__atomic_load_n(&req_ticket, __ATOMIC_ACQUIRE);
			memcpy(lab, req_label, sizeof lab);
			req_label[0] = 0;
			mt_unlock(&req_lock);
			mt_snapshot_write(reason_name(bits), lab[0] ? lab : NULL);
			__atomic_store_n(&req_served, serving, __ATOMIC_RELEASE);
			__atomic_add_fetch(&done_word, 1, __ATOMIC_RELEASE);
			futex(&done_word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
			continue;
		}
		struct timespec ts, *tp = NULL;
		uint64_t wake = period ? next : 0;
		if (tick && (!wake || next_tick < wake))
			wake = next_tick;
		if (mt_py_waiting() && (!wake || wake > now + 1000000000u))
			wake = now + 1000000000u;
		if (wake) {
			uint64_t d = wake > now ? wake - now : 0;
			ts.tv_sec = (time_t)(d / 1000000000u);
			ts.tv_nsec = (long)(d % 1000000000u);
			tp = &ts;
		}
		futex(&wake_word, FUTEX_WAIT_PRIVATE, w, tp);
	}
	return NULL;
}

static void
start_writer(void) {
	pthread_t t;
	pthread_attr_t a;
	sigset_t all, old;
	sigfillset(&all);
	/* Block every signal while creating, so the thread inherits a full
	 * mask and never runs the program's handlers. */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 << 10);
	writer_running = pthread_create(&t, &a, writer_main, NULL) == 0;
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!writer_running)
		mt_warn("cannot start the snapshot thread; only the exit "
			"snapshot will be written");
}

/* Synchronous request (C API): take a ticket, wake the writer, wait until
 * a snapshot begun after the ticket is on disk (at most 10 s). */
int
mt_request_snapshot(const char *label) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	if (!writer_running) {
		mt_snapshot_write("request", label);
		return 0;
	}
	size_t n = label ? strnlen(label, sizeof req_label - 1) : 0;
	mt_lock(&req_lock);
	memcpy(req_label, label ? label : "", n);
	req_label[n] = 0;
	uint32_t ticket = __atomic_add_fetch(&req_ticket, 1, __ATOMIC_ACQ_REL);
	mt_unlock(&req_lock);
	mt_trigger(MT_REASON_REQUEST);
	uint64_t deadline = mt_now_ns() + 10000000000ull;
	for (;;) {
		uint32_t d = __atomic_load_n(&done_word, __ATOMIC_ACQUIRE);
		if ((int32_t)(__atomic_load_n(&req_served, __ATOMIC_ACQUIRE) -
			      ticket) >= 0)
			return 0;
		if (mt_now_ns() >= deadline)
			return -1;
		struct timespec ts = {0, 50000000};
		futex(&done_word, FUTEX_WAIT_PRIVATE, d, &ts);
	}
}

/* ---- fork ------------------------------------------------------------ */

static void
prefork(void) {
	mt_self.guard++; /* fork's own allocations pass through */
	mt_lock(&req_lock);
	mt_py_prefork();
	mt_snapshot_prefork();
	mt_sites_prefork();
	mt_ptrtab_prefork();
	mt_maptab_prefork();
}

static void
postfork_parent(void) {
	mt_maptab_postfork_parent();
	mt_ptrtab_postfork_parent();
	mt_sites_postfork_parent();
	mt_snapshot_postfork_parent();
	mt_py_postfork_parent();
	mt_unlock(&req_lock);
	mt_self.guard--;
}

static void
postfork_child(void) {
	int follow = mt_cfg.follow && mt_active;
	mt_maptab_postfork_child(follow);
	mt_ptrtab_postfork_child(follow);
	mt_sites_postfork_child(follow);
	mt_snapshot_postfork_child(follow);
	mt_unlock(&req_lock);
	req_label[0] = 0;
	mt_py_postfork_child();
	mt_oom_postfork_child();
	mt_cuda_postfork_child();
	mt_pid = mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
	if (!follow) {
		mt_active = 0;
	} else {
		mt_start_mono_ns = mt_now_ns();
		mt_start_wall_ns = mt_wall_ns();
		tracked_allocs = 0;
		pending = 0;
		mt_dropped_live = 0;
		start_writer();
	}
	mt_self.guard--;
}

/* ---- lifecycle ------------------------------------------------------- */

/* MEMTALLY_FOLLOW=0: take the shim out of LD_PRELOAD in place (the string
 * only gets shorter), so exec'd children run without it. */
static void
scrub_preload(char **envp) {
	for (char **e = envp; e && *e; e++) {
		if (strncmp(*e, "LD_PRELOAD=", 11))
			continue;
		char *src = *e + 11, *dst = src;
		while (*src) {
			size_t n = strcspn(src, ": ");
			int ours = 0;
			for (size_t i = 0; i + 14 <= n; i++)
				if (!memcmp(src + i, "libmemtally.so", 14))
					ours = 1;
			if (!ours) {
				if (dst != *e + 11)
					*dst++ = ' ';
				memmove(dst, src, n);
				dst += n;
			}
			src += n;
			while (*src == ':' || *src == ' ')
				src++;
		}
		*dst = 0;
	}
}

__attribute__((constructor(101))) static void
mt_init(int argc, char **argv, char **envp) {
	(void)argc;
	(void)argv;
	if (initialised)
		return;
	initialised = 1;
	mt_self.guard++;
	mt_start_mono_ns = mt_now_ns();
	mt_start_wall_ns = mt_wall_ns();
	mt_config_init(envp);
	if (!mt_cfg.follow)
		scrub_preload(envp);
	if (!mt_cfg.host && !mt_cfg.cuda) {
		mt_self.guard--;
		return;
	}
	if (mt_sites_init(mt_cfg.max_stacks, (int)mt_cfg.depth) ||
	    mt_ptrtab_init(mt_cfg.max_live) || mt_maptab_init(mt_cfg.max_live) ||
	    mt_snapshot_init(argv, envp) || mt_oom_init()) {
		mt_warn("cannot reserve memory for the tables; not tracking");
		mt_self.guard--;
		return;
	}
	mt_unwind_init();
	if (mt_cfg.sample)
		maybe = mt_sys_mmap(sizeof(uint8_t) << FILTER_BITS);
	mt_procstat_init();
	mt_cuda_init();
	mt_py_init();
	mt_pid = mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
	{ /* warm libunwind (its caches and pools) before tracking starts */
		uintptr_t pcs[4];
		mt_unwind(pcs, 4, mt_cfg.unwind);
	}
	pthread_atfork(prefork, postfork_parent, postfork_child);
	mt_signal_init();
	start_writer();
	if (mt_cfg.verbose)
		mt_snapshot_describe();
	__atomic_store_n(&mt_active, 1, __ATOMIC_RELEASE);
	mt_self.guard--;
}

__attribute__((destructor(101))) static void
mt_fini(void) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return;
	/* A vfork child shares our memory and must not write: its pid is
	 * not the one we recorded (fork children update it). */
	if (mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0) != mt_pid)
		return;
	mt_self.guard++;
	mt_snapshot_write("exit", NULL);
	mt_snapshot_close(); /* later writes are refused */
	if (mt_cfg.oom_render)
		mt_oom_render(1); /* dumps the writer has not rendered yet */
	__atomic_store_n(&mt_active, 0, __ATOMIC_RELEASE);
	mt_self.guard--;
}

/* _exit and _Exit skip destructors: forked workers (Python's
 * multiprocessing, DataLoader workers) leave this way, and their exit
 * snapshot is still written.  The process then ends with exit_group, as
 * glibc's _exit does. */
MT_EXPORT void
_exit(int status) {
	mt_fini();
	for (;;)
		mt_sys(SYS_exit_group, status, 0, 0, 0, 0, 0);
}

MT_EXPORT void
_Exit(int status) {
	_exit(status);
}

