/*
 * callsites.c — the call sites in the file (callsites.h): each stack's
 * record, written once, before the first row that names it and after the
 * records of the stacks it takes frames from; and a snapshot's rows, with
 * what the file already says of each site, so that a snapshot after the
 * first lists only the sites that changed, or the MEMTALLY_TOP largest.
 * The layouts are specified in doc/FORMAT.md; bump MT_FORMAT_VERSION when
 * they change.
 */
#include "platform/glue.h"
#include "output/callsites.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "capture/python.h"
#include "state/asked.h"
#include "state/chunks.h"
#include "state/sites.h"

/* What the file already says of each call site: a snapshot after the
 * first lists only the sites whose figures changed ("delta"), so a long
 * run's file grows with activity, not with snapshots x sites.  A site's
 * row is known by a 63-bit signature of the figures that can change
 * (live bytes, allocations, frees, peak, at-peak bytes, which moves
 * without the site changing): 8 bytes a stack where the figures
 * themselves took 48 (34 MiB of a PyTorch process's 700 k stacks).  Two
 * different rows share a signature with odds of 2^-63 a compare. */
struct track {        /* per stack id; writer lock */
	uint64_t sig;     /* bit 0: its stack record is in the file; the
			   * rest: the signature of the last row written, 0
			   * = none */
};
#define TRACK_WRITTEN 1ull

static uint64_t
row_sig(const struct mt_site *c, int64_t at_peak) {
	uint64_t v[5] = {(uint64_t)c->live_bytes, c->allocs, c->frees, (uint64_t)c->peak_bytes,
			 (uint64_t)at_peak};
	uint64_t h = 0x243f6a8885a308d3ull;
	for (int i = 0; i < 5; i++) {
		h ^= v[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	return h | 2; /* never the "no row" signature */
}

struct top { /* call-site candidates when MEMTALLY_TOP limits them */
	int64_t live;
	uint32_t id;
	uint32_t kind;
};

/* The call sites' state, all of it under the writer lock. */
static struct {
	struct mt_chunked track;    /* struct track per stack id */
	struct top *topv;           /* MEMTALLY_TOP candidates */
	uint64_t topcap;
	uint32_t pass_stacks;       /* stacks whose records pass 1 considered */
} C = {.track = {.elem = sizeof(struct track)}};

static struct track *
track_at(uint32_t id) {
	return mt_chunk_ensure(&C.track, id) ? NULL : mt_chunk_at(&C.track, id);
}

void
mt_callsites_forget(void) {
	for (uint32_t i = 0; i < mt_stack_count(); i++) {
		struct track *t = mt_chunk_at(&C.track, i);
		if (t)
			t->sig &= ~TRACK_WRITTEN;
	}
	mt_py_forget_written();
}

void
mt_callsites_reset(void) {
	mt_chunk_reset(&C.track);
	mt_py_forget_written();
}

uint64_t
mt_callsites_memory(void) {
	return C.track.mapped;
}

/* ---- stack records --------------------------------------------------- */

static void
stack_line(struct mt_buf *b, uint32_t id, int mark) {
	int n, keep;
	uint32_t up;
	const uintptr_t *pcs = mt_stack_own(id, &n, &up, &keep);
	uint32_t py = mt_stack_py(id);
	if (mark) /* its Python records first (a dump has written them all) */
		mt_py_emit(b, py);
	/* written piece by piece, not through mt_buf_printf: a snapshot
	 * writes hundreds of thousands of these (and of site_json's rows),
	 * and parsing the format each time was a third of its instructions */
	mt_buf_lit(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_STACK "\"," MT_KEY(MT_F_ID));
	mt_buf_u64(b, id);
	if (mt_py_on) {
		mt_buf_lit(b, "," MT_KEY(MT_F_PY));
		mt_buf_u64(b, py);
	}
	int dev = mt_stack_device(id);
	if (dev >= 0) { /* memory on a GPU: its figures are that device's */
		mt_buf_lit(b, "," MT_KEY(MT_F_DEVICE));
		mt_buf_i64(b, dev);
	}
	if (up) {
		mt_buf_lit(b, "," MT_KEY(MT_F_UP));
		mt_buf_u64(b, up);
		mt_buf_lit(b, "," MT_KEY(MT_F_KEEP));
		mt_buf_i64(b, keep);
	}
	mt_buf_lit(b, "," MT_KEY(MT_F_PCS) "[");
	for (int i = 0; i < n; i++) {
		if (i)
			mt_buf_putc(b, ',');
		mt_buf_putc(b, '"');
		mt_buf_hex(b, pcs[i]);
		mt_buf_putc(b, '"');
	}
	mt_buf_lit(b, "]}\n");
	struct track *t;
	if (mark && (t = track_at(id)))
		t->sig |= TRACK_WRITTEN;
}

/* Stack id's record, after those of the stacks it takes frames from that
 * the file lacks (a fork child's file, or an up that made no allocation
 * since the file began).  The up chain is at most a stack's depth long:
 * each up shares fewer frames than the stack before it. */
static void
stack_line_needed(struct mt_buf *b, uint32_t id) {
	uint32_t chain[MT_MAX_DEPTH + 1];
	int k = 0;
	for (uint32_t u = id; u >= MT_NKINDS && k <= MT_MAX_DEPTH;) {
		struct track *t = track_at(u);
		if (t && (t->sig & TRACK_WRITTEN))
			break;
		chain[k++] = u;
		int nown, keep;
		mt_stack_own(u, &nown, &u, &keep);
	}
	while (k--)
		stack_line(b, chain[k], 1);
}

void
mt_callsites_stacks(struct mt_buf *b) {
	C.pass_stacks = mt_stack_count();
	for (uint32_t id = MT_NKINDS; id < C.pass_stacks; id++) {
		struct track *t = track_at(id);
		if (t && (t->sig & TRACK_WRITTEN))
			continue;
		if (mt_site_charged(id))
			stack_line_needed(b, id);
	}
}

void
mt_callsites_stacks_all(struct mt_buf *b) {
	uint32_t n = mt_stack_count();
	for (uint32_t id = MT_NKINDS; id < n; id++)
		stack_line(b, id, 0);
}

/* ---- rows ------------------------------------------------------------ */

/* dump: the file holds every stack already (OOM dumps write them all). */
static int
site_json(struct mt_buf *b, uint32_t id, int kind, const struct mt_site *s,
	  int *first, int dump) {
	if (!dump && id >= C.pass_stacks)
		return 0;
	/* A stack interned just before pass 1 but charged only after it had
	 * looked (allocs still 0 then) has no record in the file yet: it waits
	 * for the next snapshot, whose pass 1 writes it (found by test_stress
	 * on a clean-clone CI run: "stack 10 used before its record"). */
	struct track *t;
	if (!dump && id >= MT_NKINDS && (t = track_at(id)) && !(t->sig & TRACK_WRITTEN))
		return 0;
	if (!*first)
		mt_buf_putc(b, ',');
	*first = 0;
	mt_buf_lit(b, "{" MT_KEY(MT_F_STACK)); /* piece by piece: see stack_line */
	mt_buf_u64(b, mt_stack_public(id));
	mt_buf_lit(b, "," MT_KEY(MT_F_KIND) "\"");
	mt_buf_puts(b, mt_kind_names[kind]);
	mt_buf_lit(b, "\"," MT_KEY(MT_F_LIVE_BYTES));
	mt_buf_i64(b, s->live_bytes);
	mt_buf_lit(b, "," MT_KEY(MT_F_LIVE_COUNT));
	mt_buf_i64(b, mt_site_live_count(s));
	mt_buf_lit(b, "," MT_KEY(MT_F_ALLOCS));
	mt_buf_u64(b, s->allocs);
	mt_buf_lit(b, "," MT_KEY(MT_F_ALLOC_BYTES));
	mt_buf_u64(b, s->alloc_bytes);
	uint64_t rounded;
	if ((kind == MT_MMAP || kind == MT_MMAP_FILE) && mt_asked_get(id, kind, &rounded) &&
	    rounded <= s->alloc_bytes) { /* (a call between its two counts: next time) */
		mt_buf_lit(b, "," MT_KEY(MT_F_ASKED_BYTES));
		mt_buf_u64(b, s->alloc_bytes - rounded);
	}
	mt_buf_lit(b, "," MT_KEY(MT_F_FREES));
	mt_buf_u64(b, s->frees);
	mt_buf_lit(b, "," MT_KEY(MT_F_PEAK_BYTES));
	mt_buf_i64(b, s->peak_bytes);
	mt_buf_lit(b, "," MT_KEY(MT_F_AT_PEAK_BYTES));
	mt_buf_i64(b, mt_site_at_peak(s, mt_stack_peak_slot(id)));
	if (s->peak_ms) { /* stamped: when the peak was reached, and the step */
		mt_buf_lit(b, "," MT_KEY(MT_F_PEAK_MS));
		mt_buf_u64(b, s->peak_ms - 1);
		if (s->peak_step > 0) {
			mt_buf_lit(b, "," MT_KEY(MT_F_PEAK_STEP));
			mt_buf_i64(b, s->peak_step - 1);
		}
	}
	mt_buf_putc(b, '}');
	return 1;
}

/* Keep the MEMTALLY_TOP largest live call sites: a min-heap on live. */
static void
top_push(uint64_t *n, struct top t) {
	uint64_t k = mt_cfg.top;
	if (*n < k) {
		uint64_t i = (*n)++;
		C.topv[i] = t;
		while (i && C.topv[(i - 1) / 2].live > C.topv[i].live) {
			struct top x = C.topv[i];
			C.topv[i] = C.topv[(i - 1) / 2];
			C.topv[(i - 1) / 2] = x;
			i = (i - 1) / 2;
		}
		return;
	}
	if (t.live <= C.topv[0].live)
		return;
	C.topv[0] = t;
	for (uint64_t i = 0;;) {
		uint64_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < k && C.topv[l].live < C.topv[m].live)
			m = l;
		if (r < k && C.topv[r].live < C.topv[m].live)
			m = r;
		if (m == i)
			break;
		struct top x = C.topv[i];
		C.topv[i] = C.topv[m];
		C.topv[m] = x;
		i = m;
	}
}

void
mt_callsites_json(struct mt_buf *b, int full, int dump) {
	uint32_t n = mt_stack_count();
	int first = 1;
	struct top *tv = dump ? NULL : C.topv;
	if (mt_cfg.top && !C.topv) {
		C.topcap = mt_cfg.top;
		C.topv = mt_sys_mmap(C.topcap * sizeof *C.topv);
	}
	mt_buf_printf(b, MT_KEY(MT_F_CALLSITES_MODE) "\"%s\"," MT_KEY(MT_F_CALLSITES) "[",
		      tv ? MT_MODE_TOP : full ? MT_MODE_FULL : MT_MODE_DELTA);
	uint64_t nt = 0;
	for (uint32_t id = 0; id < n; id++) {
		{
			int k = mt_stack_kind(id), ps = mt_stack_peak_slot(id);
			struct mt_site c; /* racy copies, summed */
			if (!mt_site_read(id, ps, &c))
				continue;
			if (tv) {
				top_push(&nt, (struct top){c.live_bytes, id,
							   (uint32_t)k});
				continue;
			}
			if (dump) { /* complete, and the file's state untouched */
				site_json(b, id, k, &c, &first, 1);
				continue;
			}
			struct track *t = track_at(id);
			if (!t) { /* no memory for the shadow: list it */
				site_json(b, id, k, &c, &first, 0);
				continue;
			}
			uint64_t sig = row_sig(&c, mt_site_at_peak(&c, ps));
			if (!full && (t->sig & ~TRACK_WRITTEN) == (sig & ~TRACK_WRITTEN))
				continue; /* unchanged since the last snapshot */
			if (site_json(b, id, k, &c, &first, 0))
				t->sig = (t->sig & TRACK_WRITTEN) | (sig & ~TRACK_WRITTEN);
		}
	}
	for (uint64_t i = 0; tv && i < nt; i++) {
		struct mt_site c;
		mt_site_read(tv[i].id, mt_stack_peak_slot(tv[i].id), &c);
		site_json(b, tv[i].id, (int)tv[i].kind, &c, &first, 0);
	}
	mt_buf_putc(b, ']');
}

