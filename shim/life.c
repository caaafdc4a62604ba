/*
 * life.c — the lifecycle on top of the shim: the constructor, the writer
 * thread, fork and exit, walking one table of the modules' hooks (the
 * exit and exec hooks themselves are entry points: entry/exec.c).
 *
 * Invariants that bind here:
 *  - Snapshots are written by the writer thread (started with every signal
 *    blocked), never by an allocating thread or a signal handler, except
 *    the final one, written by the thread that runs exit(), and a C API
 *    request when no writer runs.
 *  - fork: the prefork hooks take the modules' locks in table order, the
 *    parent's release them in reverse, and the child's re-initialise them
 *    (a lock another thread held at fork is never waited on in the child).
 *  - No lock is held across a call out of the shim.
 */
#include "platform/glue.h"
#include "platform/dl.h"
#include "platform/buf.h"
#include "capture/charge.h"
#include "platform/config.h"
#include "entry/cuda.h"
#include "entry/exec.h"
#include "state/devices.h"
#include "state/events.h"
#include "entry/interpose.h"
#include "state/maptab.h"
#include "output/oom.h"
#include "output/procstat.h"
#include "state/ptrtab.h"
#include "capture/python.h"
#include "entry/signals.h"
#include "state/sites.h"
#include "output/snapshot.h"
#include "state/trigger.h"
#include "capture/unwind.h"
#include <pthread.h>
#include <sys/auxv.h>
#include <signal.h>
#include <string.h>
#include <time.h>

static int initialised;
static char **init_argv, **init_envp;

/* ---- the modules ------------------------------------------------------
 * One row per module, in lock order: prefork hooks run top to bottom, the
 * parent's and child's bottom to top.  init runs top to bottom at start;
 * a non-zero return (no memory for a table) means "do not track".
 * Adding a module: a row here. */

static int init_sites(void) { return mt_sites_init(mt_cfg.max_stacks, (int)mt_cfg.depth); }
static int init_ptrtab(void) { return mt_ptrtab_init(mt_cfg.max_live, mt_cfg.sample != 0); }
static int init_maptab(void) { return mt_maptab_init(mt_cfg.max_live); }
static int init_snapshot(void) { return mt_snapshot_init(init_argv, init_envp); }
static int init_unwind(void) {
	mt_unwind_init(mt_dlsym);
	mt_dl_on_close(mt_unwind_unloaded); /* the CFI walker's rules go */
	return 0;
}
static int init_procstat(void) { mt_procstat_init(); return 0; }
static int init_cuda(void) { mt_cuda_init(); return 0; }
static int init_python(void) { mt_py_init(); return 0; }
static void loader_parent(void) { mt_loader_postfork(0); }
static void loader_child(int follow) { (void)follow; mt_loader_postfork(1); }

static const struct module {
	const char *name;
	int (*init)(void);
	void (*prefork)(void);
	void (*parent)(void);
	void (*child)(int follow);
} modules[] = {
	/* first: the loader's lock is free before fork takes the shim's */
	{"loader", NULL, mt_loader_prefork, loader_parent, loader_child},
	{"trigger", NULL, mt_trigger_prefork, mt_trigger_postfork_parent, mt_trigger_postfork_child},
	{"python", init_python, mt_py_prefork, mt_py_postfork_parent, mt_py_postfork_child},
	{"snapshot", init_snapshot, mt_snapshot_prefork, mt_snapshot_postfork_parent,
	 mt_snapshot_postfork_child},
	{"sites", init_sites, mt_sites_prefork, mt_sites_postfork_parent, mt_sites_postfork_child},
	{"ptrtab", init_ptrtab, mt_ptrtab_prefork, mt_ptrtab_postfork_parent, mt_ptrtab_postfork_child},
	{"maptab", init_maptab, mt_maptab_prefork, mt_maptab_postfork_parent, mt_maptab_postfork_child},
	{"oom", mt_oom_init, NULL, NULL, mt_oom_postfork_child},
	{"events", NULL, NULL, NULL, mt_events_postfork_child},
	{"devices", NULL, NULL, NULL, mt_devices_postfork_child},
	{"charge", NULL, NULL, NULL, mt_charge_postfork_child},
	{"unwind", init_unwind, NULL, NULL, NULL},
	{"procstat", init_procstat, NULL, NULL, NULL},
	{"cuda", init_cuda, NULL, NULL, NULL},
};
#define NMODULES (sizeof modules / sizeof modules[0])

/* ---- the writer thread ------------------------------------------------ */

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
	int preoom = mt_cfg.preoom > 0 && !mt_cgroup_usage(&cur, &max, probe, sizeof probe);
	/* Rise: live host or device bytes this fraction (and 4 MiB) above
	 * the lowest seen since the writer's last snapshot (after a spike is
	 * freed, growth counts from where it fell to), read every 100 ms, so
	 * the timeline has the ramps (the peak itself is exact in every
	 * snapshot: at_peak_bytes). */
	uint64_t tick = preoom || mt_cfg.rise > 0 ? 100000000u : 0;
	int64_t base_host = 0, base_dev = 0;
	uint64_t next_tick = tick ? mt_now_ns() + tick : 0;
	for (;;) {
		uint32_t w = mt_trigger_word();
		int bits = mt_trigger_take();
		uint64_t now = mt_now_ns();
		int64_t host = live_host(), dev = live_dev();
		if (tick && now >= next_tick) {
			next_tick = now + tick;
			if (preoom && mt_preoom_check())
				bits |= MT_REASON_PREOOM;
			base_host = host < base_host ? host : base_host;
			base_dev = dev < base_dev ? dev : base_dev;
			if (mt_cfg.rise > 0 && (risen(host, base_host) || risen(dev, base_dev)))
				bits |= MT_REASON_RISE;
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
			char lab[MT_LABEL_MAX];
			uint32_t serving = mt_request_take(lab);
			base_host = host, base_dev = dev;
			mt_snapshot_write(mt_reason_name(bits), lab[0] ? lab : NULL);
			mt_request_served(serving);
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
		mt_trigger_sleep(w, tp);
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
	int running = pthread_create(&t, &a, writer_main, NULL) == 0;
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	mt_writer_set_running(running);
	if (!running)
		mt_warn("cannot start the snapshot thread; only the exit "
			"snapshot will be written");
}

/* ---- fork ------------------------------------------------------------ */

static void
prefork(void) {
	mt_self.guard++; /* fork's own allocations pass through */
	for (size_t i = 0; i < NMODULES; i++)
		if (modules[i].prefork)
			modules[i].prefork();
}

static void
postfork_parent(void) {
	for (size_t i = NMODULES; i-- > 0;)
		if (modules[i].parent)
			modules[i].parent();
	mt_self.guard--;
}

static void
postfork_child(void) {
	int follow = mt_cfg.follow && mt_active;
	for (size_t i = NMODULES; i-- > 0;)
		if (modules[i].child)
			modules[i].child(follow);
	mt_exec_owner(mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0), 1);
	if (!follow) {
		mt_set_active(0);
	} else {
		mt_clock_start();
		mt_solo_start(); /* the child's one thread */
		start_writer();
	}
	mt_self.guard--;
}

/* ---- start and exit --------------------------------------------------- */

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
	if (initialised)
		return;
	initialised = 1;
	/* Secure execution (setuid/setgid, file capabilities): the caller's
	 * environment is not to be trusted with where a privileged process
	 * writes, or what it runs, so the shim stays out of the way: it
	 * records nothing, writes nothing and spawns nothing (SECURITY.md).
	 * glibc loads it here only from /etc/ld.so.preload or a trusted
	 * directory; getauxval allocates nothing. */
	if (getauxval(AT_SECURE))
		return;
	mt_self.guard++;
	mt_clock_start();
	mt_config_init(envp);
	if (!mt_cfg.follow)
		scrub_preload(envp);
	if (!mt_cfg.host && !mt_cfg.cuda) {
		mt_self.guard--;
		return;
	}
	init_argv = argv;
	init_envp = envp;
	for (size_t i = 0; i < NMODULES; i++) {
		if (modules[i].init && modules[i].init()) {
			mt_warn("cannot reserve memory for the %s table; not tracking",
				modules[i].name);
			mt_self.guard--;
			return;
		}
	}
	mt_exec_owner(mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0), 0);
	{ /* warm libunwind (its caches and pools) before tracking starts */
		uintptr_t pcs[4];
		mt_unwind(pcs, 4, mt_cfg.unwind, 0, 0, 0);
	}
	pthread_atfork(prefork, postfork_parent, postfork_child);
	mt_signal_init();
	start_writer();
	if (mt_cfg.verbose)
		mt_snapshot_describe();
	mt_solo_start(); /* this thread records plainly until another does */
	mt_hooks_resolve();
	mt_set_active(1);
	mt_self.guard--;
}

/* exit() and a return from main; _exit and exec are entry/exec.c's. */
__attribute__((destructor(101))) static void
mt_fini(void) {
	mt_exit_snapshot();
}
