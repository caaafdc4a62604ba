/*
 * api.c — the exported C API (memtally.h): on-demand snapshots and marks.
 * Entry-point layer: the request goes to the writer thread (trigger.c), or
 * is written here when no writer runs; marks live in marks.c, and a
 * "step" mark asks for a snapshot every MEMTALLY_STEPS steps; PyTorch's
 * caching-allocator figures live in devices.c, its OOMs go to oom.c;
 * the process's own figures (memtally_figures) are read from totals.c;
 * the Python hook's search (memtally_owner, memtally_site_live,
 * memtally_record) reads ptrtab.c and sites.c and writes through
 * snapshot.c; its warnings (memtally_warn) are the shim's (buf.c).
 * Rules: never calls malloc; may run in any thread.
 */
#include "platform/glue.h"
#define MEMTALLY_SHIM /* the definitions, not the program's weak wrappers */
#include "memtally.h"
#include "capture/charge.h"
#include "state/marks.h"
#include "state/phases.h"
#include "output/snapshot.h"
#include "capture/python.h"
#include "state/trigger.h"
#include "state/devices.h"
#include "state/totals.h"
#include "output/oom.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "state/ptrtab.h"
#include "state/sites.h"
#include <string.h>

MT_EXPORT int
memtally_snapshot(const char *label) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	int r = mt_request_wait(label);
	if (r == 1) { /* no writer thread: write it here */
		if (mt_py_waiting()) /* as the writer looks before each (an embedder's libpython) */
			mt_py_init();
		char lab[MT_LABEL_MAX]; /* cut as the writer's would be */
		mt_label_copy(lab, label);
		mt_snapshot_write("request", lab[0] ? lab : NULL);
		return 0;
	}
	return r;
}

/* Which "step" marks get a snapshot.  MEMTALLY_STEPS=N: each one that
 * reaches a multiple of N (from below: floor(value / N) grew).  Else the
 * cadence (MEMTALLY_CADENCE): a step is a mark that moves the value
 * forward; the first 64 steps each get one, then every 2nd step for 64
 * snapshots, every 4th, and so on (mt_cadence_step, trigger.h). */
static int
step_due(const char *name, double old, double value) {
	if (!name || strcmp(name, "step"))
		return 0;
	if (old != old) /* a new mark: counted from 0 */
		old = 0;
	if (mt_cfg.steps) {
		double n = (double)mt_cfg.steps;
		if (value > old)
			mt_cadence_step();
		return __builtin_floor(value / n) > __builtin_floor(old / n);
	}
	/* counted however snapshots are asked for: the time cadence steps
	 * aside while steps move */
	int due = value > old && mt_cadence_step();
	return mt_cfg.cadence && due;
}

/* A step snapshot describes its step: it is written here, by the marking
 * thread, of the state at the mark (as MEMTALLY_EVERY's is by the
 * allocating thread), not by the writer thread a moment later, when a
 * function's locals may be gone.  The caller of memtally_mark holds no
 * shim lock (it is the program's own call). */
MT_EXPORT int
memtally_mark(const char *name, double value) {
	double old;
	int r = mt_mark_set(name, value, &old);
	if (!r && step_due(name, old, value) && __atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		mt_trigger_sync(MT_REASON_STEP);
	return r;
}

/* Phases and the workload (state/phases.c): the program's own calls,
 * never from inside the allocator; one short lock. */
MT_EXPORT int
memtally_phase(const char *name, int begin) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	return mt_phase_mark(name, begin != 0);
}

MT_EXPORT int
memtally_workload(const char *json) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	return mt_workload_set(json, json ? strnlen(json, 1024) : 0);
}

MT_EXPORT int
memtally_torch_figures(int device, double step, unsigned long long allocated,
		       unsigned long long reserved, unsigned long long active,
		       unsigned long long inactive_split) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE) || device < 0 || device >= MT_MAXDEV)
		return -1;
	const uint64_t fig[4] = {allocated, reserved, active, inactive_split};
	mt_dev_torch(device, step, fig);
	return 0;
}

MT_EXPORT int
memtally_torch_oom(int device, unsigned long long size, unsigned long long limit,
		   unsigned long long free_bytes, char *stem, unsigned long n) {
	if (stem && n)
		stem[0] = 0;
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	return mt_oom_torch(device, size, limit, free_bytes, stem, n);
}

/* Relaxed loads of the totals (totals.h): no lock, no allocation, any
 * thread.  A figure read while another thread allocates may be a few
 * bytes stale; each is one atomic load. */
MT_EXPORT int
memtally_figures(struct memtally_figures *f, unsigned long size) {
	struct memtally_figures z;
	memset(&z, 0, sizeof z);
	int on = __atomic_load_n(&mt_active, __ATOMIC_ACQUIRE);
	if (on && !__atomic_load_n(&mt_since_on, __ATOMIC_RELAXED))
		mt_since_reset(); /* the first call starts the peaks */
	if (on) {
		_Static_assert(MT_NKINDS <= 8, "memtally_figures holds 8 kinds");
		z.nkinds = MT_NKINDS;
		int64_t pend = mt_heap_pending(); /* (totals.h) */
		for (int k = 0; k < MT_NKINDS; k++) {
			int64_t live = mt_since_live(k) + (k == MT_HEAP ? pend : 0);
			int64_t peak = __atomic_load_n(&mt_since_peak[k], __ATOMIC_RELAXED);
			z.live[k] = live > 0 ? (unsigned long long)live : 0;
			z.peak[k] = peak > live ? (unsigned long long)peak : z.live[k];
		}
		int64_t h = mt_since_live(MT_SINCE_HOST) + pend, d = mt_since_live(MT_SINCE_DEV);
		int64_t hp = __atomic_load_n(&mt_since_peak[MT_SINCE_HOST], __ATOMIC_RELAXED);
		int64_t dp = __atomic_load_n(&mt_since_peak[MT_SINCE_DEV], __ATOMIC_RELAXED);
		z.host_live = h > 0 ? (unsigned long long)h : 0;
		z.host_peak = hp > h ? (unsigned long long)hp : z.host_live;
		z.device_live = d > 0 ? (unsigned long long)d : 0;
		z.device_peak = dp > d ? (unsigned long long)dp : z.device_live;
	}
	if (f)
		memcpy(f, &z, size < sizeof z ? size : sizeof z);
	return on ? 0 : -1;
}

MT_EXPORT int
memtally_peak_reset(void) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	mt_since_reset();
	return 0;
}

/* A host heap block's key is its address as is (ptrtab.h: CUDA keys carry
 * a tag in the top bits, so a host address never finds one). */
MT_EXPORT int
memtally_owner(const void *addr, unsigned *stack_id) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	uintptr_t a = (uintptr_t)addr;
	struct mt_ptr e;
	if (!a || (a & MT_TAG_MASK) || !mt_ptrtab_maybe(a) || !mt_ptrtab_find(a, &e) ||
	    e.kind != MT_HEAP)
		return 1;
	if (stack_id)
		*stack_id = mt_stack_public(e.stack);
	return 0;
}

/* mt_site_read sums the shared figures and each thread's share with
 * racy loads (as the writer does) and may raise the shared peak with its
 * atomic CAS and stamps: safe from any thread, beside the writer's. */
MT_EXPORT int
memtally_site_live(unsigned stack_id, long long *live_bytes) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	if (stack_id < MT_NKINDS || stack_id >= mt_stack_count())
		return 1;
	struct mt_site s;
	mt_site_read(stack_id, mt_stack_peak_slot(stack_id), &s);
	if (live_bytes)
		*live_bytes = (long long)s.live_bytes;
	return 0;
}

MT_EXPORT int
memtally_warn(const char *message) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	char one[256]; /* one line */
	size_t n = 0;
	for (; message && message[n] && n < sizeof one - 1; n++)
		one[n] = message[n] == '\n' || message[n] == '\r' ? ' ' : message[n];
	one[n] = 0;
	mt_warn("%s", one);
	return 0;
}

MT_EXPORT int
memtally_record(const char *line) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return -1;
	if (!line)
		return 1;
	size_t n = 0;
	while (n <= 65536 && line[n] && line[n] != '\n' && line[n] != '\r')
		n++;
	if (n > 65536 || line[n] || n < 2 || line[0] != '{' || line[n - 1] != '}')
		return 1;
	return mt_snapshot_record(line, n);
}
