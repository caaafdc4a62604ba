/*
 * api.c — the exported C API (memtally.h): on-demand snapshots and marks.
 * Entry-point layer: the request goes to the writer thread (trigger.c), or
 * is written here when no writer runs; marks live in marks.c.
 * Rules: never calls malloc; may run in any thread.
 */
#include "platform/glue.h"
#include "memtally.h"
#include "capture/charge.h"
#include "state/marks.h"
#include "output/snapshot.h"
#include "capture/python.h"
#include "state/trigger.h"

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

MT_EXPORT int
memtally_mark(const char *name, double value) {
	return mt_mark_set(name, value);
}
