/* snaprec.c — the parsers of the records that hold figures: snapshot
 * (totals, process figures, marks, call sites), and an OOM dump's oom,
 * segment and trace records.  Sizes, counts and times must be whole
 * numbers and not negative, a kind's and a device's live bytes too (one
 * counter each in the shim: a negative one was printed as "-118 MiB");
 * a call site's live figures and a kind's live count may be (racy sums
 * of per-thread shares).  Times are bounded (reader.h) so that what is
 * computed from them fits. */
#include "read/reader.h"
#include "base/util.h"
#include "base/sb.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* Phase name (len bytes) as an index + 1 into the file's names; 0 when
 * the table is full. */
static int
phase_ix(struct ctx *c, const char *name, size_t len) {
	struct mfile *f = c->f;
	for (int i = 0; i < f->nphase_names; i++)
		if (strlen(f->phase_names[i]) == len && !memcmp(f->phase_names[i], name, len))
			return i + 1;
	if (f->nphase_names == MAX_PHASES || !len)
		return 0;
	f->phase_names[f->nphase_names] = xstrndup(name, len);
	return ++f->nphase_names;
}

static int
phase_str(struct ctx *c, struct jv *o, const char *key) {
	struct jv *v = json_get(c->d, o, key);
	return v && v->type == J_STR ? phase_ix(c, v->s, v->len) : 0;
}

static void
totals(struct ctx *c, struct jv *o, struct totals *t) {
	t->present = 1;
	t->peak_phase = phase_str(c, o, MT_F_PEAK_PHASE);
	struct jv *ps = json_get(c->d, o, MT_F_PEAK_STEP);
	t->peak_step = ps && ps->type == J_NUM ? ps->d : NAN;
	t->live_bytes = opt_count(c, o, MT_F_LIVE_BYTES, 0, INT64_MAX);
	t->live_count = opt_i64(c, o, MT_F_LIVE_COUNT, 0);
	t->allocs = opt_count(c, o, MT_F_ALLOCS, 0, INT64_MAX);
	t->alloc_bytes = opt_count(c, o, MT_F_ALLOC_BYTES, 0, INT64_MAX);
	t->frees = opt_count(c, o, MT_F_FREES, 0, INT64_MAX);
	t->free_bytes = opt_count(c, o, MT_F_FREE_BYTES, 0, INT64_MAX);
	t->peak_bytes = opt_count(c, o, MT_F_PEAK_BYTES, 0, INT64_MAX);
}

/* The process, cgroup, allocator and device figures (-1: absent). */
/* A device's `torch` object: PyTorch's caching allocator at a step. */
static void
devtorch(struct ctx *c, struct snap *s, struct jv *x, int64_t d) {
	struct jv *t = json_get(c->d, x, MT_F_TORCH);
	if (!t || t->type != J_OBJ || d < 0 || d > 255)
		return;
	struct devtorch v = {.device = (int)d,
			     .allocated = opt_count(c, t, MT_F_ALLOCATED_BYTES, -1, INT64_MAX),
			     .reserved = opt_count(c, t, MT_F_RESERVED_BYTES, -1, INT64_MAX),
			     .active = opt_count(c, t, MT_F_ACTIVE_BYTES, -1, INT64_MAX),
			     .inactive_split = opt_count(c, t, MT_F_INACTIVE_SPLIT_BYTES, -1, INT64_MAX),
			     .step = json_num(c->d, t, MT_F_STEP, -1)};
	if (v.allocated < 0 || v.reserved < 0 || v.active < 0 || v.inactive_split < 0)
		bad(c, "devices[].torch: a byte figure missing");
	s->torch = xrealloc(s->torch, (size_t)(s->ntorch + 1) * sizeof *s->torch);
	s->torch[s->ntorch++] = v;
}

static void
proc_figures(struct ctx *c, struct jv *o, struct snap *s) {
	struct jv *p = json_get(c->d, o, MT_F_PROC), *cg = json_get(c->d, o, MT_F_CGROUP);
	s->rss_bytes = opt_count(c, p, MT_F_RSS_BYTES, -1, INT64_MAX);
	s->vms_bytes = opt_count(c, p, MT_F_VMS_BYTES, -1, INT64_MAX);
	s->pss_bytes = opt_count(c, p, MT_F_PSS_BYTES, -1, INT64_MAX);
	s->cg_current = opt_count(c, cg, MT_F_CURRENT_BYTES, -1, INT64_MAX);
	s->cg_max = opt_count(c, cg, MT_F_MAX_BYTES, -1, INT64_MAX); /* null: no limit */
	/* the allocator's footprint: glibc's arenas plus its mmapped
	 * blocks, or jemalloc's resident bytes */
	struct jv *al = json_get(c->d, o, MT_F_ALLOCATOR);
	s->alloc_footprint = -1;
	if (al && al->type == J_OBJ) {
		int64_t ar = opt_count(c, al, MT_F_ARENA_BYTES, -1, INT64_MAX),
			hb = opt_count(c, al, MT_F_HBLKHD_BYTES, -1, INT64_MAX),
			rs = opt_count(c, al, MT_F_RESIDENT_BYTES, -1, INT64_MAX);
		s->alloc_footprint = ar < 0 || hb < 0 ? rs : hb > INT64_MAX - ar ? INT64_MAX : ar + hb;
	}
	for (int d = 0; d < MAX_DEVS; d++)
		s->dev_live[d] = s->dev_peak[d] = s->dev_total[d] = -1;
	struct jv *devs = json_get(c->d, o, MT_F_DEVICES);
	if (devs && devs->type == J_ARR)
		for (struct jv *x = json_child(c->d, devs); x; x = json_next(c->d, x)) {
			int64_t d = device_ordinal(c, x);
			if (d >= 0 && d < MAX_DEVS) {
				s->dev_live[d] = opt_count(c, x, MT_F_LIVE_BYTES, 0, INT64_MAX);
				s->dev_peak[d] = opt_count(c, x, MT_F_PEAK_BYTES, -1, INT64_MAX);
				s->dev_total[d] = opt_count(c, x, MT_F_DRIVER_TOTAL_BYTES, -1, INT64_MAX);
			}
			devtorch(c, s, x, d);
		}
	for (int k = 0; k < NKINDS; k++) {
		struct jv *t = json_get(c->d, o, kind_names[k]);
		if (t && t->type == J_OBJ)
			totals(c, t, &s->tot[k]);
	}
	struct jv *sh = json_get(c->d, o, MT_F_SHIM);
	s->dropped_stacks = opt_count(c, sh, MT_F_DROPPED_STACKS, 0, INT64_MAX);
	s->dropped_live = opt_count(c, sh, MT_F_DROPPED_LIVE, 0, INT64_MAX);
	s->dropped_snaps = opt_count(c, sh, MT_F_DROPPED_SNAPSHOTS, 0, INT64_MAX);
	s->shim_bytes = opt_count(c, sh, MT_F_MEMORY_BYTES, 0, INT64_MAX);
	s->coalesced = opt_count(c, sh, MT_F_COALESCED, 0, INT64_MAX);
	s->reserved_bytes = opt_count(c, o, MT_F_MMAP_RESERVED_BYTES, 0, INT64_MAX);
}

static void
marks(struct ctx *c, struct jv *o, struct snap *s) {
	struct jv *mk = json_get(c->d, o, MT_F_MARKS);
	if (mk && mk->type == J_OBJ)
		for (struct jv *x = json_child(c->d, mk); x && s->nmarks < MAX_MARKS; x = json_next(c->d, x))
			if (x->type == J_NUM) {
				s->marks[s->nmarks].name = xstrndup(x->key, x->keylen);
				s->marks[s->nmarks++].value = x->d;
			}
}

/* The phase open at s, the spans that ended since the previous snapshot
 * (appended to the file's), the workload. */
static void
phases(struct ctx *c, struct jv *o, struct snap *s) {
	s->phase = phase_str(c, o, MT_F_PHASE);
	struct jv *ph = json_get(c->d, o, MT_F_PHASES);
	if (ph && ph->type == J_OBJ)
		for (struct jv *x = json_child(c->d, ph); x; x = json_next(c->d, x)) {
			struct jv *sp = x->type == J_OBJ ? json_get(c->d, x, MT_F_SPANS) : NULL;
			int id = phase_ix(c, x->key, x->keylen);
			if (!sp || sp->type != J_ARR || !id)
				continue;
			for (struct jv *y = json_child(c->d, sp); y; y = json_next(c->d, y)) {
				struct jv *b = y->type == J_ARR ? json_child(c->d, y) : NULL;
				struct jv *e = b ? json_next(c->d, b) : NULL;
				struct jv *st = e ? json_next(c->d, e) : NULL;
				if (!st || b->type != J_NUM || e->type != J_NUM || st->type != J_NUM ||
				    b->d < 0 || e->d < b->d || e->d > RD_MAX_MS)
					bad(c, "a phase span is not [begin_ms, end_ms, step]");
				struct mfile *f = c->f;
				f->spans = xgrow(f->spans, f->nspans + 1, &f->cap_spans, sizeof *f->spans);
				f->spans[f->nspans++] = (struct phasespan){
					id, (int64_t)b->d, (int64_t)e->d, st->d >= 0 ? st->d : NAN};
			}
		}
	struct jv *w = json_get(c->d, o, MT_F_WORKLOAD);
	if (!w || w->type != J_OBJ)
		return;
	struct sb t = {0};
	for (struct jv *x = json_child(c->d, w); x; x = json_next(c->d, x)) {
		if (x->type == J_NUM && s->work.n < MAX_WORK &&
		    !(x->keylen == 4 && !memcmp(x->key, "step", 4))) {
			s->work.v[s->work.n].name = xstrndup(x->key, x->keylen);
			s->work.v[s->work.n++].value = x->d;
		} else if (x->type == J_ARR && x->keylen == 6 && !memcmp(x->key, "shapes", 6)) {
			for (struct jv *y = json_child(c->d, x); y; y = json_next(c->d, y)) {
				if (y->type != J_ARR)
					continue;
				sb_puts(&t, t.len ? ", " : "");
				int k = 0;
				for (struct jv *z = json_child(c->d, y); z; z = json_next(c->d, z))
					if (z->type == J_NUM)
						sb_printf(&t, "%s%.0f", k++ ? "x" : "", z->d);
			}
		}
	}
	s->work.shapes = t.len ? t.p : (free(t.p), NULL);
}

/* A call site's row: one pass over its members (the reader's hot loop). */
enum { SK_STACK, SK_LIVE, SK_COUNT, SK_ALLOCS, SK_ABYTES, SK_FREES, SK_PEAK, SK_ATPEAK, SK_PEAKMS,
       SK_ASKED, SK_N };
#define SK(k) {k, sizeof k - 1}
static const struct {
	const char *k;
	uint32_t n;
} site_keys[SK_N] = {
	[SK_STACK] = SK(MT_F_STACK),       [SK_LIVE] = SK(MT_F_LIVE_BYTES),
	[SK_COUNT] = SK(MT_F_LIVE_COUNT),  [SK_ALLOCS] = SK(MT_F_ALLOCS),
	[SK_ABYTES] = SK(MT_F_ALLOC_BYTES), [SK_FREES] = SK(MT_F_FREES),
	[SK_PEAK] = SK(MT_F_PEAK_BYTES),   [SK_ATPEAK] = SK(MT_F_AT_PEAK_BYTES),
	[SK_PEAKMS] = SK(MT_F_PEAK_MS),    [SK_ASKED] = SK(MT_F_ASKED_BYTES),
};
#undef SK

/* 1 and *t from call site x; 0 for a kind from a newer shim (ignored). */
static int
site(struct ctx *c, struct jv *x, struct site *t) {
	if (x->type != J_OBJ)
		bad(c, "a call site is not an object");
	/* -1: files before at_peak_bytes, before peak_ms */
	int64_t v[SK_N] = {[SK_ATPEAK] = -1, [SK_PEAKMS] = -1, [SK_ASKED] = -1};
	double peak_step = NAN; /* none, or files before it */
	unsigned have = 0;
	int kind = -2;
	for (struct jv *m = json_child(c->d, x); m; m = json_next(c->d, m)) {
		if (m->type == J_STR && m->keylen == sizeof MT_F_KIND - 1 &&
		    !memcmp(m->key, MT_F_KIND, sizeof MT_F_KIND - 1)) {
			kind = kind_parse(m->s);
			continue;
		}
		if (m->type == J_NUM && m->keylen == sizeof MT_F_PEAK_STEP - 1 &&
		    !memcmp(m->key, MT_F_PEAK_STEP, sizeof MT_F_PEAK_STEP - 1)) {
			peak_step = m->d;
			continue;
		}
		for (int k = 0; k < SK_N; k++)
			if (m->keylen == site_keys[k].n && !memcmp(m->key, site_keys[k].k, m->keylen)) {
				if (m->type != J_NUM || !m->is_int)
					bad(c, "call site: field \"%s\" is not an integer", site_keys[k].k);
				v[k] = m->i;
				have |= 1u << k;
				break;
			}
	}
	if (!(have & 1u << SK_STACK) || v[SK_STACK] < 0)
		bad(c, "call site without an integer \"stack\"");
	if (!(have & 1u << SK_LIVE))
		bad(c, "call site without an integer \"live_bytes\"");
	if (kind == -2)
		bad(c, "call site without a \"kind\"");
	for (int k = SK_ALLOCS; k <= SK_PEAK; k++)
		if (v[k] < 0)
			bad(c, "call site: field \"%s\" is negative (%lld)", site_keys[k].k, (long long)v[k]);
	if (v[SK_PEAKMS] < -1 || v[SK_PEAKMS] > RD_MAX_MS || (have & 1u << SK_PEAKMS && v[SK_PEAKMS] < 0))
		bad(c, "call site: field \"%s\" is %lld, outside 0 .. %lld", MT_F_PEAK_MS,
		    (long long)v[SK_PEAKMS], RD_MAX_MS);
	if (have & 1u << SK_ASKED && (v[SK_ASKED] < 0 || v[SK_ASKED] > v[SK_ABYTES]))
		bad(c, "call site: field \"%s\" is %lld, outside 0 .. alloc_bytes (%lld)", MT_F_ASKED_BYTES,
		    (long long)v[SK_ASKED], (long long)v[SK_ABYTES]);
	int missing = 0;
	uint32_t ix = stack_ref(c->f, v[SK_STACK], &missing);
	if (missing)
		bad(c, "call site refers to stack %lld, which has no earlier stack record",
		    (long long)v[SK_STACK]);
	if (kind < 0)
		return 0;
	*t = (struct site){.stack = ix, .kind = (uint8_t)kind, .live_bytes = v[SK_LIVE],
			   .live_count = v[SK_COUNT], .allocs = v[SK_ALLOCS], .alloc_bytes = v[SK_ABYTES],
			   .frees = v[SK_FREES], .peak_bytes = v[SK_PEAK], .at_peak_bytes = v[SK_ATPEAK],
			   .peak_ms = v[SK_PEAKMS], .peak_step = peak_step, .asked_bytes = v[SK_ASKED]};
	return 1;
}

static int
sites_mode(struct ctx *c, struct jv *o) {
	const char *mode = json_str(c->d, o, MT_F_CALLSITES_MODE);
	int m = !mode || !strcmp(mode, MT_MODE_FULL) ? SITES_FULL
		: !strcmp(mode, MT_MODE_DELTA)       ? SITES_DELTA
		: !strcmp(mode, MT_MODE_TOP)         ? SITES_TOP
						     : -1;
	if (m < 0)
		bad(c, "unknown callsites_mode \"%s\"", mode);
	if (m == SITES_DELTA && !c->f->nsnaps)
		bad(c, "the first snapshot of a file cannot be a delta");
	return m;
}

/* The shim numbers a file's snapshots from 0 up, one more each (a
 * snapshot it could not write leaves a gap): a seq that does not go up
 * is a snapshot written twice or a file spliced, refused. */
static void
seq_goes_on(struct ctx *c, int64_t seq) {
	const struct mfile *f = c->f;
	if (!f->nsnaps)
		return;
	const struct snap *p = &f->snaps[f->nsnaps - 1];
	if (seq == p->seq)
		bad(c, "snapshot seq %lld a second time (line %d has it): a duplicate snapshot",
		    (long long)seq, p->line);
	if (seq < p->seq)
		bad(c, "snapshot seq %lld after seq %lld (line %d): a file's seq never goes back",
		    (long long)seq, (long long)p->seq, p->line);
}

static int
same_site(const struct site *a, const struct site *b) {
	return a->stack == b->stack && a->kind == b->kind && a->live_bytes == b->live_bytes &&
	       a->live_count == b->live_count && a->allocs == b->allocs &&
	       a->alloc_bytes == b->alloc_bytes && a->frees == b->frees &&
	       a->peak_bytes == b->peak_bytes && a->at_peak_bytes == b->at_peak_bytes &&
	       a->peak_ms == b->peak_ms && a->asked_bytes == b->asked_bytes &&
	       (a->peak_step == b->peak_step || (isnan(a->peak_step) && isnan(b->peak_step)));
}

/* Memory follows what a file says that differs, not its repetition: a
 * snapshot whose rows change nothing is kept as a delta of no rows (read
 * back the same by snap_sites), so 30,000 copies of one snapshot cost
 * 30,000 snapshot headers, not 30,000 copies of its rows.  Rows change
 * nothing when they are those of the last snapshot that changed the call
 * sites (ref; every snapshot since is a delta of no rows) and either they
 * are a delta (setting the rows they set again) or both are complete
 * (full or top: the state is those rows, in that order, either way). */
static void
repeated_rows(struct ctx *c, struct snap *s) {
	struct mfile *f = c->f;
	const struct snap *ref = c->rows_ref ? &f->snaps[c->rows_ref - 1] : NULL;
	int same = ref && s->nsites && s->nsites == ref->nsites &&
		   (s->mode == SITES_DELTA || (ref->mode != SITES_DELTA));
	for (size_t i = 0; same && i < s->nsites; i++)
		same = same_site(&s->sites[i], &ref->sites[i]);
	if (same) {
		free(s->sites);
		s->sites = xmalloc(1);
		s->nsites = 0;
		s->mode = SITES_DELTA;
	} else if (s->nsites || s->mode != SITES_DELTA) {
		c->rows_ref = f->nsnaps + 1; /* s, once appended */
	}
}

/* A snapshot's call-site rows. */
static void
snap_rows(struct ctx *c, struct jv *o, struct snap *s) {
	s->mode = sites_mode(c, o);
	struct jv *cs = json_get(c->d, o, MT_F_CALLSITES);
	if (!cs || cs->type != J_ARR)
		bad(c, "snapshot without a \"callsites\" array");
	s->sites = xmalloc(cs->len * sizeof *s->sites + 1);
	for (struct jv *x = json_child(c->d, cs); x; x = json_next(c->d, x))
		s->nsites += (size_t)site(c, x, &s->sites[s->nsites]);
}

/* Built in c->pending, appended to the file's snapshots when whole. */
void
rec_snapshot(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	struct snap *s = xcalloc(1, sizeof *s);
	c->pending = s;
	s->line = (int)c->line;
	s->seq = need_count(c, o, MT_F_SEQ);
	seq_goes_on(c, s->seq);
	const char *r = json_str(c->d, o, MT_F_REASON);
	if (!r)
		bad(c, "snapshot without a \"reason\"");
	snprintf(s->reason, sizeof s->reason, "%s", r);
	s->label = opt_str(c, o, MT_F_LABEL);
	s->wall_ns = opt_count(c, o, MT_F_WALL_NS, 0, RD_MAX_NS);
	s->mono_ns = opt_count(c, o, MT_F_MONO_NS, 0, RD_MAX_NS);
	s->elapsed_ms = need_count(c, o, MT_F_ELAPSED_MS);
	if (s->elapsed_ms > RD_MAX_MS)
		bad(c, "field \"%s\" is %lld, beyond %lld", MT_F_ELAPSED_MS, (long long)s->elapsed_ms,
		    RD_MAX_MS);
	proc_figures(c, o, s);
	marks(c, o, s);
	phases(c, o, s);
	if (!c->summary) { /* a summary has totals and marks only: no rows */
		snap_rows(c, o, s);
		repeated_rows(c, s);
	}
	c->held += sizeof *s + s->nsites * sizeof *s->sites + (size_t)s->ntorch * sizeof *s->torch +
		   (size_t)s->nmarks * 32;
	f->snaps = xgrow(f->snaps, f->nsnaps + 1, &f->cap_snaps, sizeof *f->snaps);
	f->snaps[f->nsnaps++] = *s;
	free(s);
	c->pending = NULL;
}

/* An OOM dump's outcome line (appended when what became of the failure
 * was known: doc/FORMAT.md). */
void
rec_outcome(struct ctx *c, struct jv *o) {
	struct oominfo *m = c->f->oom;
	const char *k = json_str(c->d, o, MT_F_OUTCOME);
	if (!m)
		bad(c, "an outcome record before the oom record");
	if (!k)
		bad(c, "outcome record without an \"%s\"", MT_F_OUTCOME);
	snprintf(m->outcome, sizeof m->outcome, "%s", k);
	m->out_ms = opt_count(c, o, MT_F_TIME_MS, -1, RD_MAX_MS);
	m->out_frees = opt_count(c, o, MT_F_FREES, 0, INT64_MAX);
	m->out_freed = opt_count(c, o, MT_F_FREED_BYTES, 0, INT64_MAX);
	const char *by = json_str(c->d, o, MT_F_BY);
	m->by_torch = by && !strcmp(by, "torch");
	m->torch_size = opt_count(c, o, MT_F_TORCH_SIZE, -1, INT64_MAX);
	m->torch_limit = opt_count(c, o, MT_F_TORCH_LIMIT_BYTES, -1, INT64_MAX);
	m->torch_free = opt_count(c, o, MT_F_TORCH_FREE_BYTES, -1, INT64_MAX);
	const char *ts = json_str(c->d, o, MT_F_TORCH_SNAPSHOT);
	if (ts && (strchr(ts, '/') || strlen(ts) >= sizeof m->torch_snapshot))
		bad(c, "outcome: %s must be a file name beside the dump", MT_F_TORCH_SNAPSHOT);
	snprintf(m->torch_snapshot, sizeof m->torch_snapshot, "%s", ts ? ts : "");
}

void
rec_oom(struct ctx *c, struct jv *o) {
	struct oominfo m = {0};
	const char *k = json_str(c->d, o, MT_F_KIND), *api = json_str(c->d, o, MT_F_API),
		   *err = json_str(c->d, o, MT_F_ERROR);
	if (!k)
		bad(c, "oom record without a \"kind\"");
	snprintf(m.kind, sizeof m.kind, "%s", k);
	snprintf(m.api, sizeof m.api, "%s", api ? api : "?");
	snprintf(m.error, sizeof m.error, "%s", err ? err : "?");
	struct jv *rq = json_get(c->d, o, MT_F_REQUESTED_BYTES);
	if (rq && !json_u64(rq, &m.requested)) /* up to 2^64-1: malloc(SIZE_MAX) */
		bad(c, "field \"%s\" is not a byte count", MT_F_REQUESTED_BYTES);
	m.device = device_ordinal(c, o);
	m.drv_free = opt_count(c, o, MT_F_DRIVER_FREE_BYTES, -1, INT64_MAX);
	m.drv_total = opt_count(c, o, MT_F_DRIVER_TOTAL_BYTES, -1, INT64_MAX);
	m.cg_current = opt_count(c, o, MT_F_CGROUP_CURRENT_BYTES, -1, INT64_MAX);
	m.cg_max = opt_count(c, o, MT_F_CGROUP_MAX_BYTES, -1, INT64_MAX);
	m.elapsed_ms = opt_count(c, o, MT_F_ELAPSED_MS, 0, RD_MAX_MS);
	m.sampled = flag(c, o, MT_F_SAMPLED);
	free(c->f->oom);
	c->f->oom = xmalloc(sizeof m);
	*c->f->oom = m;
}

void
rec_segment(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	struct segment s = {0};
	s.kind = kind_of(c, o);
	struct jv *a = json_get(c->d, o, MT_F_ADDRESS), *h = json_get(c->d, o, MT_F_HANDLE);
	s.is_handle = a == NULL && h != NULL;
	if (!json_hex(a ? a : h, &s.addr))
		bad(c, "segment without an \"address\" or \"handle\"");
	s.size = (uint64_t)need_count(c, o, MT_F_SIZE);
	s.stack = stack_ref(f, opt_count(c, o, MT_F_STACK, 0, INT64_MAX), NULL);
	s.time_ms = opt_count(c, o, MT_F_TIME_MS, 0, RD_MAX_MS);
	s.device = (int)device_ordinal(c, o);
	s.stream = (int)opt_count(c, o, MT_F_STREAM, 0, INT32_MAX);
	s.mapped = flag(c, o, MT_F_MAPPED);
	s.sampled = flag(c, o, MT_F_SAMPLED);
	if (s.kind < 0)
		return; /* a kind from a newer shim */
	c->held += sizeof s;
	f->segs = xgrow(f->segs, f->nsegs + 1, &f->cap_segs, sizeof *f->segs);
	f->segs[f->nsegs++] = s;
}

void
rec_trace(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	struct event e = {0};
	e.kind = kind_of(c, o);
	const char *op = json_str(c->d, o, MT_F_OP);
	snprintf(e.op, sizeof e.op, "%s", op ? op : "?");
	json_hex(json_get(c->d, o, MT_F_ADDRESS), &e.addr);
	e.size = (uint64_t)opt_count(c, o, MT_F_SIZE, 0, INT64_MAX);
	e.stack = stack_ref(f, opt_count(c, o, MT_F_STACK, 0, INT64_MAX), NULL);
	e.time_ms = opt_count(c, o, MT_F_TIME_MS, 0, RD_MAX_MS);
	if (e.kind < 0)
		return; /* a kind from a newer shim */
	c->held += sizeof e;
	f->events = xgrow(f->events, f->nevents + 1, &f->cap_events, sizeof *f->events);
	f->events[f->nevents++] = e;
}

/* {"type":"kept","stack":ID,"step":S,"chain":[{"how":..,"name":..,
 * "type":..,"where":..},...],...}: written by the Python hook; every step
 * must have how, name and type (strings), at most 256 steps. */
void
rec_kept(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	struct kept k = {0};
	k.stack = stack_ref(f, need_count(c, o, MT_F_STACK), NULL);
	struct jv *st = json_get(c->d, o, MT_F_STEP);
	k.step = st && st->type == J_NUM ? st->d : NAN;
	k.objects = opt_count(c, o, MT_F_OBJECTS, -1, INT64_MAX);
	k.live_bytes = opt_count(c, o, MT_F_LIVE_BYTES, -1, INT64_MAX);
	k.search_ms = opt_count(c, o, MT_F_SEARCH_MS, -1, INT64_MAX);
	k.final = flag(c, o, MT_F_FINAL);
	struct jv *ch = json_get(c->d, o, MT_F_CHAIN);
	if (!ch || ch->type != J_ARR)
		bad(c, "kept record without a \"chain\" array");
	size_t n = 0;
	for (struct jv *x = json_child(c->d, ch); x; x = json_next(c->d, x), n++) { /* check all first */
		if (x->type != J_OBJ || !str_field(c, x, MT_F_HOW) || !str_field(c, x, MT_F_NAME) ||
		    !str_field(c, x, MT_F_TYPE))
			bad(c, "kept record: chain step %zu without \"how\", \"name\" and \"type\"", n);
		str_field(c, x, MT_F_WHERE);
	}
	if (!n || n > 256)
		bad(c, "kept record: a chain of %zu steps (1 to 256)", n);
	k.steps = xcalloc(n, sizeof *k.steps);
	for (struct jv *x = json_child(c->d, ch); x; x = json_next(c->d, x)) {
		struct keptstep *s = &k.steps[k.nsteps++];
		s->how = xstrdup(json_str(c->d, x, MT_F_HOW));
		s->name = xstrdup(json_str(c->d, x, MT_F_NAME));
		s->type = xstrdup(json_str(c->d, x, MT_F_TYPE));
		const char *w = json_str(c->d, x, MT_F_WHERE);
		s->where = w ? xstrdup(w) : NULL;
		c->held += 64 + strlen(s->name) + strlen(s->type) + (w ? strlen(w) : 0);
	}
	c->held += sizeof k;
	f->kept = xgrow(f->kept, f->nkept + 1, &f->cap_kept, sizeof *f->kept);
	f->kept[f->nkept++] = k;
}

/* {"type":"searched","step":S,"final":B,"skipped":..,"cut":..,
 * "objects":N,...}: one search of the Python hook's, or one skipped. */
void
rec_searched(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	struct searched k = {0};
	struct jv *st = json_get(c->d, o, MT_F_STEP);
	k.step = st && st->type == J_NUM ? st->d : NAN;
	k.final = flag(c, o, MT_F_FINAL);
	k.objects = opt_count(c, o, MT_F_OBJECTS, -1, INT64_MAX);
	const char *v = str_field(c, o, MT_F_SKIPPED);
	snprintf(k.skipped, sizeof k.skipped, "%s", v ? v : "");
	v = str_field(c, o, MT_F_CUT);
	snprintf(k.cut, sizeof k.cut, "%s", v ? v : "");
	c->held += sizeof k;
	f->searched = xgrow(f->searched, f->nsearched + 1, &f->cap_searched, sizeof *f->searched);
	f->searched[f->nsearched++] = k;
}
