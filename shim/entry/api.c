/*
 * api.c — the exported C API (memtally.h): on-demand snapshots and marks.
 * Entry-point layer: the request goes to the writer thread (trigger.c), or
 * is written here when no writer runs; marks live in marks.c, and a
 * "step" mark asks for a snapshot every MEMTALLY_STEPS steps; PyTorch's
 * caching-allocator figures live in devices.c, its OOMs go to oom.c.
 * Rules: never calls malloc; may run in any thread.
 */
#include "platform/glue.h"
#define MEMTALLY_SHIM /* the definitions, not the program's weak wrappers */
#include "memtally.h"
#include "capture/charge.h"
#include "state/marks.h"
#include "output/snapshot.h"
#include "capture/python.h"
#include "state/trigger.h"
#include "state/devices.h"
#include "output/oom.h"
#include "platform/config.h"
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

/* MEMTALLY_STEPS=N: a "step" mark that reaches a multiple of N (from
 * below: floor(value / N) grew) asks the writer for a snapshot, as the
 * snapshot signal does: an atomic or and a futex wake, no wait.  Requests
 * made while one is being written are answered by the next snapshot. */
static int
step_due(const char *name, double old, double value) {
	if (!mt_cfg.steps || !name || strcmp(name, "step"))
		return 0;
	double n = (double)mt_cfg.steps;
	if (old != old) /* a new mark: counted from 0 */
		old = 0;
	return __builtin_floor(value / n) > __builtin_floor(old / n);
}

MT_EXPORT int
memtally_mark(const char *name, double value) {
	double old;
	int r = mt_mark_set(name, value, &old);
	if (!r && step_due(name, old, value) && __atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		mt_trigger(MT_REASON_STEP);
	return r;
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
