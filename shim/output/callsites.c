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
	/* What a snapshot reads: every site (all), or the groups of 64 ids
	 * in set: those charged since the last (sites.h mt_site_changed),
	 * and, once a peak moved (its epoch differs from epochs[]), those
	 * in revisit: groups where a row the file holds gives at-peak bytes
	 * other than its live bytes, which a peak's move makes its live
	 * bytes without a charge.  A snapshot so costs what changed, not
	 * what the process ever allocated from. */
	int all;
	uint32_t read;              /* sites the last snapshot's rows read */
	uint64_t set[MT_SITE_GROUPS / 64];
	uint32_t epochs[MT_PEAK_SLOTS];
	uint8_t revisit[MT_SITE_GROUPS];
} C = {.track = {.elem = sizeof(struct track)}};

/* Choose what this snapshot reads (full: every site).  Before pass 1. */
static void
take(int full) {
	int moved = 0;
	for (int p = 0; p < MT_PEAK_SLOTS; p++) {
		uint32_t e = __atomic_load_n(&mt_peak_epoch[p], __ATOMIC_RELAXED);
		moved |= e != C.epochs[p];
		C.epochs[p] = e;
	}
	C.all = !mt_sites_take_changed(C.set) || full || mt_cfg.top;
	if (C.all || !moved)
		return;
	uint32_t n = (mt_stack_count() + (1u << MT_SITE_GROUP_SHIFT) - 1) >> MT_SITE_GROUP_SHIFT;
	for (uint32_t g = 0; g < n; g++)
		if (C.revisit[g])
			C.set[g >> 6] |= 1ull << (g & 63);
}

/* The first id at or after id (below n) that this snapshot reads; n if
 * none: every id of a group in the set. */
static inline uint32_t
next_id(uint32_t id, uint32_t n) {
	if (C.all)
		return id;
	while (id < n) {
		uint32_t g = id >> MT_SITE_GROUP_SHIFT;
		uint64_t w = C.set[g >> 6] >> (g & 63);
		if (w & 1)
			return id;
		g = w ? g + (uint32_t)__builtin_ctzll(w) : (g | 63) + 1;
		id = g << MT_SITE_GROUP_SHIFT;
	}
	return n;
}

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
mt_callsites_stacks(struct mt_buf *b, int full) {
	take(full);
	C.pass_stacks = mt_stack_count();
	for (uint32_t id = next_id(MT_NKINDS, C.pass_stacks); id < C.pass_stacks;
	     id = next_id(id + 1, C.pass_stacks)) {
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
	int every = dump || full || tv || C.all;
	uint32_t group = UINT32_MAX, reads = 0;
	for (uint32_t id = every ? 0 : next_id(0, n); id < n; id = every ? id + 1 : next_id(id + 1, n)) {
		int k = mt_stack_kind(id), ps = mt_stack_peak_slot(id);
		uint32_t g = id >> MT_SITE_GROUP_SHIFT;
		if (!dump && g != group) /* a group read whole: found again below */
			C.revisit[group = g] = 0;
		struct mt_site c; /* racy copies, summed */
		reads++;
		if (!mt_site_read(id, ps, &c))
			continue;
		if (tv) {
			top_push(&nt, (struct top){c.live_bytes, id, (uint32_t)k});
			continue;
		}
		if (dump) { /* complete, and the file's state untouched */
			site_json(b, id, k, &c, &first, 1);
			continue;
		}
		int64_t at = mt_site_at_peak(&c, ps);
		if (at != c.live_bytes) /* a peak's move changes its row */
			C.revisit[g] = 1;
		struct track *t = track_at(id);
		if (!t) { /* no memory for the shadow: list it */
			site_json(b, id, k, &c, &first, 0);
			continue;
		}
		uint64_t sig = row_sig(&c, at);
		if (!full && (t->sig & ~TRACK_WRITTEN) == (sig & ~TRACK_WRITTEN))
			continue; /* unchanged since the last snapshot */
		if (site_json(b, id, k, &c, &first, 0))
			t->sig = (t->sig & TRACK_WRITTEN) | (sig & ~TRACK_WRITTEN);
		else /* its stack's record is not in the file yet: next time */
			__atomic_store_n(&mt_site_changed[g], 1, __ATOMIC_RELAXED);
	}
	for (uint64_t i = 0; tv && i < nt; i++) {
		struct mt_site c;
		mt_site_read(tv[i].id, mt_stack_peak_slot(tv[i].id), &c);
		site_json(b, tv[i].id, (int)tv[i].kind, &c, &first, 0);
	}
	mt_buf_putc(b, ']');
	if (!dump)
		C.read = reads;
}

uint32_t
mt_callsites_read(void) {
	return C.read;
}

