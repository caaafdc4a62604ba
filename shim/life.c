/*
 * life.c — the lifecycle on top of the shim: the constructor, the writer
 * thread, fork and exit, walking one table of the modules' hooks (the
 * exit and exec hooks themselves are entry points: entry/exec.c).
 *
 * Invariants that bind here:
 *  - Snapshots are written by the writer thread (output/writer.c: started
 *    when first needed, with every signal blocked), never by a signal
 *    handler but one: the final one of a death by signal, by the thread
 *    that took it, when it holds no shim lock (entry/signals.c); the
 *    final one of an exit by the thread that runs exit(), an exec one by
 *    the exec'ing thread, MEMTALLY_EVERY's by the allocating thread, a C
 *    API request by its caller when no writer runs.
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
#include "platform/fdio.h"
#include "platform/tmem.h"
#include "entry/cuda.h"
#include "entry/exec.h"
#include "state/devices.h"
#include "state/phases.h"
#include "state/events.h"
#include "entry/interpose.h"
#include "state/maptab.h"
#include "output/file.h"
#include "output/oom.h"
#include "output/procstat.h"
#include "state/ptrtab.h"
#include "capture/python.h"
#include "entry/signals.h"
#include "state/sites.h"
#include "output/snapshot.h"
#include "output/prom.h"
#include "state/trigger.h"
#include "capture/unwind.h"
#include "output/writer.h"
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
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
static void signals_child(int follow) { (void)follow; mt_signal_postfork_child(); }
static void phases_child(int follow) { (void)follow; mt_phases_postfork_child(); }
static void tmem_child(int follow) { (void)follow; mt_tmem_postfork_child(); }

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
	{"prom", NULL, NULL, NULL, mt_prom_postfork_child},
	{"sites", init_sites, mt_sites_prefork, mt_sites_postfork_parent, mt_sites_postfork_child},
	{"ptrtab", init_ptrtab, mt_ptrtab_prefork, mt_ptrtab_postfork_parent, mt_ptrtab_postfork_child},
	{"maptab", init_maptab, mt_maptab_prefork, mt_maptab_postfork_parent, mt_maptab_postfork_child},
	{"oom", mt_oom_init, NULL, NULL, mt_oom_postfork_child},
	{"events", NULL, NULL, NULL, mt_events_postfork_child},
	{"devices", NULL, NULL, NULL, mt_devices_postfork_child},
	{"phases", NULL, NULL, NULL, phases_child},
	{"charge", NULL, NULL, NULL, mt_charge_postfork_child},
	{"unwind", init_unwind, NULL, NULL, NULL},
	{"procstat", init_procstat, NULL, NULL, NULL},
	{"cuda", init_cuda, NULL, NULL, NULL},
	{"signals", NULL, NULL, NULL, signals_child},
	/* last, so first in the child: its one thread keeps its tables */
	{"tmem", NULL, NULL, NULL, tmem_child},
};
#define NMODULES (sizeof modules / sizeof modules[0])

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
	/* the child hooks re-initialised the locks prefork took: this, the
	 * child's one thread, holds none */
	mt_locks_held = 0;
	mt_locks_after = NULL; /* a death the parent deferred is the parent's */
	if (!follow) {
		mt_set_active(0);
	} else {
		mt_clock_start();
		mt_solo_start(); /* the child's one thread */
		mt_writer_postfork_child();
		mt_writer_init(); /* started when needed, as at start */
	}
	mt_self.guard--;
}

/* ---- Go -------------------------------------------------------------- */

/* Whether the program is Go's: its executable carries a "Go" build-id
 * note (PT_NOTE).  The first object dl_iterate_phdr reports is it. */
static int
go_note(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof *nh;
			if ((nh->n_namesz == 3 || nh->n_namesz == 4) && name + 3 <= end &&
			    !memcmp(name, "Go", 3))
				*(int *)arg = 1;
			p = name + ((nh->n_namesz + 3) & ~3u) + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return 1; /* the program only */
}

/* A Go program leaves through the exit_group system call, past exit()
 * and every destructor: no exit snapshot can be written.  Said once;
 * without MEMTALLY_INTERVAL, snapshots every second keep its last state
 * within a second of its end. */
static void
go_check(void) {
	int go = 0;
	dl_iterate_phdr(go_note, &go);
	if (!go)
		return;
	if (mt_cfg.interval > 0) {
		mt_warn("a Go program ends through exit_group, past the exit snapshot: its last "
			"snapshot is the last MEMTALLY_INTERVAL one");
		return;
	}
	mt_cfg.interval = 1;
	mt_warn("a Go program ends through exit_group, past the exit snapshot: taking a snapshot "
		"every second (MEMTALLY_INTERVAL=1) so its last state is kept");
}

/* ---- the preload order ------------------------------------------------ */

/* The program's malloc must be ours: with another allocator ahead of the
 * shim in LD_PRELOAD ("libjemalloc.so.2 libmemtally.so") every heap call
 * goes straight to it and nothing is recorded, silently.  The objects
 * loaded before the shim (preloads come right after the program) are
 * asked whether they define malloc themselves; said once, with what to do.
 * (dlsym(RTLD_DEFAULT) cannot tell: a program that takes malloc's address
 * exports a stub of its own.)  From the constructor, under the guard,
 * after the hooks have found the real functions. */
struct order {
	uintptr_t self;     /* the shim's load address */
	int before;         /* still before the shim */
	char name[256];     /* an object before it that defines malloc */
};

static int
defines_malloc(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	struct order *o = arg;
	if (info->dlpi_addr == o->self)
		return 1; /* the rest come after us */
	const char *n = info->dlpi_name;
	if (!n || !n[0] || !strncmp(n, "linux-vdso", 10))
		return 0; /* the program itself: its malloc, if any, is a stub */
	void *h = dlopen(n, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	Dl_info di;
	void *m = mt_real_dlsym() ? mt_real_dlsym()(h, "malloc") : NULL;
	int theirs = m && dladdr(m, &di) && (uintptr_t)di.dli_fbase == info->dlpi_addr;
	dlclose(h);
	if (theirs) {
		size_t k = strlen(n) < sizeof o->name - 1 ? strlen(n) : sizeof o->name - 1;
		memcpy(o->name, n, k);
		o->name[k] = 0;
		return 1;
	}
	return 0;
}

static void
preload_order(void) {
	Dl_info mine;
	struct order o = {0};
	if (!dladdr((void *)preload_order, &mine))
		return;
	o.self = (uintptr_t)mine.dli_fbase;
	dl_iterate_phdr(defines_malloc, &o);
	if (o.name[0])
		mt_warn("malloc is %s's, loaded before libmemtally.so: heap allocations are not "
			"recorded (put libmemtally.so first in LD_PRELOAD, or use memtally run)", o.name);
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

/* MEMTALLY_VERBOSE: the effective configuration and the file's path on
 * stderr, at start. */
static void
describe(void) {
	char mem[4096];
	struct mt_buf b;
	mt_buf_fixed(&b, mem, sizeof mem - 1);
	mt_config_json(&b);
	mem[b.len] = 0;
	mt_say("config %s", mem);
	mt_say("writing %s", mt_file_describe());
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
	if (mt_cfg.valgrind)
		mt_fdio_no_child();
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
	if (mt_cfg.unwind != MT_UNWIND_CFI) { /* warm libunwind (its caches
					       * and pools) before tracking
					       * starts; the CFI walker leaves
					       * it unset until a stack needs
					       * it (its pipe, its caches) */
		uintptr_t pcs[4];
		mt_unwind(pcs, 4, mt_cfg.unwind, 0, 0, 0);
	}
	pthread_atfork(prefork, postfork_parent, postfork_child);
	mt_signal_init();
	go_check();
	mt_writer_init(); /* the thread starts now only for periodic work */
	mt_snapshot_open_early(); /* a privileged process: before it drops */
	if (mt_cfg.verbose)
		describe();
	mt_solo_start(); /* this thread records plainly until another does */
	mt_hooks_resolve();
	preload_order();
	mt_set_active(1);
	mt_self.guard--;
}

/* exit() and a return from main; _exit and exec are entry/exec.c's. */
__attribute__((destructor(101))) static void
mt_fini(void) {
	mt_exit_snapshot();
}
