/*
 * figures.c — a snapshot's process-wide figures (figures.h): each kind's
 * totals, and the shim's own record (its memory by use, its tables'
 * counts, what it dropped, what its last write cost).
 * Rules: never calls malloc; runs under the writer lock (or in an OOM
 * dump, which holds it).
 */
#include "platform/glue.h"
#include "output/figures.h"
#include "output/callsites.h"
#include "output/prom.h"
#include "platform/buf.h"
#include "platform/tmem.h"
#include "capture/charge.h"
#include "capture/python.h"
#include "capture/unwind.h"
#include "state/events.h"
#include "state/maptab.h"
#include "state/phases.h"
#include "state/ptrtab.h"
#include "state/sites.h"
#include "state/solo.h"
#include "state/trigger.h"

void
mt_figures_totals(struct mt_buf *b, int note) {
	for (int k = 0; k < MT_NKINDS; k++) {
		struct mt_totals tt = mt_totals[k], *t = &tt;
		if (k == MT_HEAP)
			mt_heap_counts(&tt);
		if (note) /* MEMTALLY_PROMETHEUS's figures: the record's */
			mt_prom_note_kind(k, t->live_bytes, t->peak_bytes);
		if (!t->allocs && !t->frees)
			continue;
		mt_buf_printf(b,
			      "\"%s\":{" MT_KEY(MT_F_LIVE_BYTES) "%ld," MT_KEY(MT_F_LIVE_COUNT) "%ld,"
			      MT_KEY(MT_F_ALLOCS) "%lu," MT_KEY(MT_F_ALLOC_BYTES) "%lu," MT_KEY(MT_F_FREES) "%lu,"
			      MT_KEY(MT_F_FREE_BYTES) "%lu," MT_KEY(MT_F_PEAK_BYTES) "%ld",
			      mt_kind_names[k], (long)t->live_bytes,
			      (long)t->live_count, (unsigned long)t->allocs,
			      (unsigned long)t->alloc_bytes,
			      (unsigned long)t->frees,
			      (unsigned long)t->free_bytes, (long)t->peak_bytes);
		if (k == MT_HEAP && mt_cfg.sample)
			mt_buf_puts(b, "," MT_KEY(MT_F_LIVE_ESTIMATED) "true");
		mt_phases_peak_json(b, k);
		mt_buf_puts(b, "},");
	}
}

void
mt_figures_shim(struct mt_buf *b, uint64_t writer_mem, uint64_t dropped_snaps, uint64_t last_write_ns) {
	uint64_t pystacks = 0, pyframes = 0, pyretired = 0, pydropped = 0, pybytes = 0;
	mt_py_stats(&pystacks, &pyframes, &pyretired, &pydropped, &pybytes);
	uint64_t stack_mem, site_mem, sites_mem = mt_sites_memory(&stack_mem, &site_mem);
	/* the walker's rules, and each thread's caches of rules, walks and
	 * stack ids (platform/tmem.h): with the stacks */
	uint64_t walk_mem = mt_unwind_memory() + mt_tmem_bytes();
	stack_mem += walk_mem;
	sites_mem += walk_mem;
	uint64_t live_mem = mt_ptrtab_memory() + mt_maptab_memory();
	mt_buf_printf(b,
		      "," MT_KEY(MT_F_SHIM) "{" MT_KEY(MT_F_MEMORY_BYTES) "%lu," MT_KEY(MT_F_MEMORY) "{" MT_KEY(MT_F_STACKS) "%lu,"
		      MT_KEY(MT_F_SITES) "%lu," MT_KEY(MT_F_LIVE) "%lu," MT_KEY(MT_F_WRITER) "%lu," MT_KEY(MT_F_PYTHON) "%lu},"
		      MT_KEY(MT_F_STACKS) "%u,"
		      MT_KEY(MT_F_LIVE_ENTRIES) "%lu," MT_KEY(MT_F_LIVE_MAPS) "%lu,"
		      MT_KEY(MT_F_DROPPED_STACKS) "%lu," MT_KEY(MT_F_DROPPED_LIVE) "%lu,"
		      MT_KEY(MT_F_OOM_DUMPS) "%lu," MT_KEY(MT_F_DROPPED_SNAPSHOTS) "%lu," MT_KEY(MT_F_LAST_WRITE_NS) "%lu,"
		      MT_KEY(MT_F_UNWIND_FALLBACKS) "%lu," MT_KEY(MT_F_SOLO) "%d," MT_KEY(MT_F_COALESCED) "%lu,"
		      MT_KEY(MT_F_SITES_READ) "%u",
		      (unsigned long)(sites_mem + live_mem + writer_mem + pybytes),
		      (unsigned long)stack_mem, (unsigned long)site_mem, (unsigned long)live_mem,
		      (unsigned long)writer_mem, (unsigned long)pybytes,
		      mt_stack_count() - MT_NKINDS, (unsigned long)mt_ptrtab_count(),
		      (unsigned long)mt_maptab_count(),
		      (unsigned long)mt_sites_dropped,
		      (unsigned long)mt_dropped_live, (unsigned long)mt_dump_count(),
		      (unsigned long)dropped_snaps, (unsigned long)last_write_ns,
		      (unsigned long)mt_unwind_fallbacks(),
		      __atomic_load_n(&mt_solo.one, __ATOMIC_RELAXED) == 1,
		      (unsigned long)mt_trigger_coalesced(), mt_callsites_read());
	if (mt_py_on)
		mt_buf_printf(b, "," MT_KEY(MT_F_PYSTACKS) "%lu," MT_KEY(MT_F_PYFRAMES) "%lu,"
			      MT_KEY(MT_F_PYCODE_RETIRED) "%lu," MT_KEY(MT_F_DROPPED_PYSTACKS) "%lu",
			      (unsigned long)pystacks, (unsigned long)pyframes,
			      (unsigned long)pyretired, (unsigned long)pydropped);
	mt_buf_puts(b, "}}\n");
}
