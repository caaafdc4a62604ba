/*
 * writer.c — the writer thread (writer.h): its loop (triggers, the
 * interval, the rise and pre-OOM watches), its start when first needed,
 * and its stop around a change of identity.
 */
#include "platform/glue.h"
#include "platform/dl.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "state/trigger.h"
#include "state/sites.h"
#include "capture/python.h"
#include "capture/charge.h"
#include "output/procstat.h"
#include "output/snapshot.h"
#include "output/oom.h"
#include "output/writer.h"
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

/* NONE -> STARTING -> RUNNING -> STOPPING -> NONE, by compare-and-swap:
 * no lock is held across pthread_create or pthread_join. */
enum { W_NONE, W_STARTING, W_RUNNING, W_STOPPING };
static int state;
static int quit;       /* the thread leaves at its next look */
static int parked;     /* identity changes in flight: no start */
static int wanted;     /* asked for while parked */
static pthread_t thread;
typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static create_fn real_create;

static int64_t
live_host(void) {
	return __atomic_load_n(&mt_totals[MT_HEAP].live_bytes, __ATOMIC_RELAXED) +
	       __atomic_load_n(&mt_totals[MT_MMAP].live_bytes, __ATOMIC_RELAXED);
}

static int64_t
live_dev(void) {
	return __atomic_load_n(&mt_totals[MT_CUDA].live_bytes, __ATOMIC_RELAXED) +
	       __atomic_load_n(&mt_totals[MT_CUDA_MANAGED].live_bytes, __ATOMIC_RELAXED) +
	       __atomic_load_n(&mt_totals[MT_CUDA_VMM].live_bytes, __ATOMIC_RELAXED);
}

static int
risen(int64_t now, int64_t base) {
	return now - base >= (4 << 20) && (double)now >= (double)base * (1 + mt_cfg.rise);
}

/* Pre-OOM watches only where there is a limit to approach. */
static int
preoom_watch(void) {
	char probe[256];
	uint64_t cur, max;
	return mt_cfg.preoom > 0 && !mt_cgroup_usage(&cur, &max, probe, sizeof probe);
}

/* The state of the loop between wake-ups. */
struct loop {
	uint64_t period, next, tick, next_tick;
	int preoom, cadence; /* cadence: the time cadence (trigger.h) */
	int64_t base_host, base_dev;
};

/* The reasons due now, from the clock and the watches. */
static int
due(struct loop *L, uint64_t now, int64_t host, int64_t dev) {
	int bits = 0;
	if (L->tick && now >= L->next_tick) {
		L->next_tick = now + L->tick;
		if (L->preoom && mt_preoom_check())
			bits |= MT_REASON_PREOOM;
		/* Rise: live host or device bytes this fraction (and 4 MiB)
		 * above the lowest seen since the writer's last snapshot
		 * (after a spike is freed, growth counts from where it fell
		 * to), read every 100 ms, so the timeline has the ramps (the
		 * peak itself is exact in every snapshot: at_peak_bytes). */
		L->base_host = host < L->base_host ? host : L->base_host;
		L->base_dev = dev < L->base_dev ? dev : L->base_dev;
		if (mt_cfg.rise > 0 && (risen(host, L->base_host) || risen(dev, L->base_dev)))
			bits |= MT_REASON_RISE;
	}
	if (L->cadence && mt_cadence_time_due(now))
		bits |= MT_REASON_INTERVAL;
	if (L->period && now >= L->next) {
		bits |= MT_REASON_INTERVAL;
		L->next += L->period;
		if (L->next <= now)
			L->next = now + L->period;
	}
	return bits;
}

static void
sleep_until_due(struct loop *L, uint32_t w, uint64_t now) {
	struct timespec ts, *tp = NULL;
	uint64_t wake = L->period ? L->next : 0;
	if (L->tick && (!wake || L->next_tick < wake))
		wake = L->next_tick;
	uint64_t cad = L->cadence ? mt_cadence_time_next() : 0;
	if (cad && (!wake || cad < wake))
		wake = cad;
	if (mt_py_waiting() && (!wake || wake > now + 1000000000u))
		wake = now + 1000000000u;
	if (wake) {
		uint64_t d = wake > now ? wake - now : 0;
		ts.tv_sec = (time_t)(d / 1000000000u);
		ts.tv_nsec = (long)(d % 1000000000u);
		tp = &ts;
	}
	mt_trigger_sleep(w, tp);
}

static void *
writer_main(void *arg) {
	(void)arg;
	mt_self.guard = 1; /* this thread's own allocations are not tracked */
	struct loop L = {.period = (uint64_t)(mt_cfg.interval * 1e9), .preoom = preoom_watch(),
			 .cadence = mt_cadence_time_next() != 0};
	L.next = L.period ? mt_now_ns() + L.period : 0;
	/* the watches read every 100 ms (three syscalls for the cgroup) */
	L.tick = L.preoom || mt_cfg.rise > 0 ? 100000000u : 0;
	L.next_tick = L.tick ? mt_now_ns() + L.tick : 0;
	while (!__atomic_load_n(&quit, __ATOMIC_ACQUIRE)) {
		uint32_t w = mt_trigger_word();
		int bits = mt_trigger_take();
		uint64_t now = mt_now_ns();
		int64_t host = live_host(), dev = live_dev();
		bits |= due(&L, now, host, dev);
		if (mt_py_waiting()) /* a libpython dlopen'ed since? */
			mt_py_init();
		if (bits & MT_REASON_RENDER) {
			mt_oom_render(0);
			bits &= ~MT_REASON_RENDER;
		}
		if (bits) {
			char lab[MT_LABEL_MAX];
			uint32_t serving = mt_request_take(lab);
			L.base_host = host, L.base_dev = dev;
			uint64_t c0 = mt_thread_cpu_ns();
			mt_snapshot_write(mt_reason_name(bits), lab[0] ? lab : NULL);
			mt_cadence_wrote(mt_now_ns(), mt_thread_cpu_ns() - c0);
			mt_request_served(serving);
			continue;
		}
		if (!__atomic_load_n(&quit, __ATOMIC_ACQUIRE))
			sleep_until_due(&L, w, now);
	}
	return NULL;
}

void
mt_writer_start(void) {
	if (__atomic_load_n(&parked, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&wanted, 1, __ATOMIC_RELEASE);
		return;
	}
	int none = W_NONE;
	if (!__atomic_compare_exchange_n(&state, &none, W_STARTING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return; /* running, or another thread starts it */
	if (!real_create)
		real_create = (create_fn)mt_dlsym(RTLD_NEXT, "pthread_create");
	pthread_attr_t a;
	sigset_t all, old;
	sigfillset(&all);
	/* Block every signal while creating, so the thread inherits a full
	 * mask and never runs the program's handlers. */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 << 10);
	__atomic_store_n(&quit, 0, __ATOMIC_RELEASE);
	mt_self.guard++; /* pthread_create's own allocations pass through */
	int running = real_create && real_create(&thread, &a, writer_main, NULL) == 0;
	mt_self.guard--;
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	mt_writer_set_running(running);
	__atomic_store_n(&state, running ? W_RUNNING : W_NONE, __ATOMIC_RELEASE);
	if (!running)
		mt_warn("cannot start the snapshot thread; only the exit "
			"snapshot will be written");
}

int
mt_writer_park(void) {
	__atomic_add_fetch(&parked, 1, __ATOMIC_ACQ_REL);
	for (;;) {
		int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
		if (s == W_NONE)
			return 0;
		if (s == W_RUNNING && __atomic_compare_exchange_n(&state, &s, W_STOPPING, 0,
								  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			break;
		mt_sys(SYS_sched_yield, 0, 0, 0, 0, 0, 0); /* starting, or another parks it */
	}
	mt_writer_set_running(0);
	__atomic_store_n(&quit, 1, __ATOMIC_RELEASE);
	mt_trigger_wake();
	mt_self.guard++;
	pthread_join(thread, NULL);
	mt_self.guard--;
	__atomic_store_n(&state, W_NONE, __ATOMIC_RELEASE);
	return 1;
}

void
mt_writer_resume(int was_running) {
	if (__atomic_sub_fetch(&parked, 1, __ATOMIC_ACQ_REL))
		return; /* another change is in flight: its resume starts it */
	if (was_running || __atomic_exchange_n(&wanted, 0, __ATOMIC_ACQ_REL))
		mt_writer_start();
}

/* MEMTALLY_EVERY, a step snapshot, and the time cadence while no writer
 * thread runs: the calling thread writes the snapshot itself (it holds no
 * shim lock there: charge.c's count_tracked and writer_maybe, api.c's
 * memtally_mark). */
static void
write_now(int reason) {
	int g = mt_self.guard;
	mt_self.guard = 1;
	if (mt_py_waiting()) /* as the writer looks before each */
		mt_py_init();
	uint64_t c0 = mt_thread_cpu_ns();
	mt_snapshot_write(mt_reason_name(reason), NULL);
	mt_cadence_wrote(mt_now_ns(), mt_thread_cpu_ns() - c0);
	mt_self.guard = g;
}

void
mt_writer_init(void) {
	mt_trigger_set_writer(write_now, mt_writer_start);
	if (mt_cfg.cadence && !(mt_cfg.interval > 0))
		mt_cadence_init(mt_now_ns());
	if (mt_cfg.interval > 0 || preoom_watch())
		mt_writer_start(); /* periodic work from the first moment */
}

void
mt_writer_postfork_child(void) {
	state = W_NONE;
	parked = wanted = quit = 0;
	mt_writer_set_running(0);
}
