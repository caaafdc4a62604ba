/* moment.c — what held memory, and when (answer.h): the moment a view
 * shows (the peak unless asked), its call sites grouped into rows as
 * report names them, and the spikes (call sites whose own high-water mark
 * far exceeds what they held at the process peak). */
#include "answer/answer.h"
#include "answer/sites.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static long
moment_of(const struct mfile *f, const struct ask *a) {
	if (f->has_sel)
		return f->sel;
	return a->snapshot == SNAP_DEFAULT ? SNAP_PEAK : a->snapshot;
}

struct site *
answer_sites(struct mfile *f, const struct ask *a, const struct snap **s, int *at_peak,
	     size_t *n) {
	struct site *v = sites_for(f, moment_of(f, a), a->kind, s, at_peak, n);
	if (a->only_gpu)
		*n = sites_on_device(f, v, *n, a->only_gpu - 1);
	return v;
}

const char *
answer_moment_name(const struct mfile *f, const struct ask *a) {
	static char buf[48];
	long m = moment_of(f, a);
	if (m == SNAP_PEAK)
		return "at the peak";
	if (m == SNAP_LAST)
		return "at the last snapshot";
	snprintf(buf, sizeof buf, "at snapshot %ld", m);
	return buf;
}

uint64_t *
row_slot(struct keyix *ix, const struct row *r, int *fresh) {
	char key[1100];
	int klen = snprintf(key, sizeof key, "%c%.*s", r->kind + 1, (int)site_key_len(r->name),
			    r->name);
	if (klen >= (int)sizeof key)
		klen = (int)sizeof key - 1;
	return keyix_slot(ix, key, (size_t)klen, fresh);
}

/* One site into its row: the row shows its largest site's stack, counts
 * the sites holding bytes then (as report counts them), and sums the rest. */
static void
row_add(struct row *w, const struct site *s, int64_t live_now) {
	if (s->live_bytes > w->top) {
		w->top = s->live_bytes;
		w->stack = s->stack;
	}
	w->nsites += s->live_bytes > 0;
	w->nall++;
	w->live += s->live_bytes;
	w->live_now += live_now;
	w->count += s->live_count;
	w->allocs += s->allocs;
	w->alloc_bytes += s->alloc_bytes;
	w->frees += s->frees;
	if (s->peak_bytes > w->peak)
		w->peak = s->peak_bytes;
}

static int
cmp_row(const void *x, const void *y) {
	const struct row *a = x, *b = y;
	if (a->live != b->live)
		return a->live < b->live ? 1 : -1;
	if (a->peak != b->peak)
		return a->peak < b->peak ? 1 : -1;
	return strcmp(a->name, b->name);
}

/* The last snapshot's live bytes of each (stack, kind), for live_now. */
static int64_t *
live_now_of(struct mfile *f, size_t *nmap) {
	*nmap = f->nstacks * NKINDS;
	int64_t *m = xcalloc(*nmap + 1, sizeof *m);
	if (!f->nsnaps)
		return m;
	size_t n;
	struct site *v = snap_sites(f, &f->snaps[f->nsnaps - 1], &n);
	for (size_t i = 0; i < n; i++)
		if (v[i].stack < f->nstacks)
			m[(size_t)v[i].stack * NKINDS + v[i].kind] = v[i].live_bytes;
	free(v);
	return m;
}

/* A stack's row name, from names when given (kept there), else computed
 * (with nm's Python-stack cache). */
static const char *
row_name(struct mfile *f, const struct ask *a, uint32_t stack, char *buf, size_t n,
	 struct namer *nm, struct row_names *names) {
	char **slot = NULL;
	if (names && stack < f->nstacks) {
		if (!names->by_stack) {
			names->by_stack = xcalloc(f->nstacks, sizeof *names->by_stack);
			names->n = f->nstacks;
			names->apart = a->apart;
		}
		if (stack < names->n && names->apart == a->apart) {
			slot = &names->by_stack[stack];
			if (*slot) {
				snprintf(buf, n, "%s", *slot);
				return buf;
			}
		}
	}
	if (a->apart)
		site_name(f, stack, 2, buf, n);
	else
		site_group_name(f, stack, buf, n, nm);
	if (slot)
		*slot = xstrdup(buf);
	return buf;
}

void
row_names_free(struct row_names *names) {
	for (size_t i = 0; names->by_stack && i < names->n; i++)
		free(names->by_stack[i]);
	for (size_t i = 0; names->label && i < names->n; i++)
		free(names->label[i]);
	free(names->by_stack);
	free(names->label);
	free(names->gid);
	free(names->rowof);
	free(names->stamp);
	if (names->groups)
		keyix_free(names->groups);
	free(names->groups);
	memset(names, 0, sizeof *names);
}

struct row *
answer_rows(struct mfile *f, const struct ask *a, const struct site *v, size_t n, int at_peak,
	    size_t *nr) {
	return answer_rows_named(f, a, v, n, at_peak, nr, NULL);
}

/* Stack's row group in names (interned once: its name, else the stack
 * itself apart), from 1. */
static uint32_t
group_of(struct mfile *f, const struct ask *a, uint32_t stack, struct namer *nm,
	 struct row_names *names) {
	if (names->gid[stack])
		return names->gid[stack];
	char name[1024];
	row_name(f, a, stack, name, sizeof name, nm, names);
	if (a->apart) {
		names->gid[stack] = stack + 1;
		return stack + 1;
	}
	int fresh = 1;
	uint64_t *slot = keyix_slot(names->groups, name, strlen(name), &fresh);
	if (fresh)
		*slot = ++names->ngroups;
	names->gid[stack] = (uint32_t)*slot;
	return (uint32_t)*slot;
}

/* answer_rows_named over names' caches: the same rows, each site's row
 * found by two array reads once its stack was met (the page asks for the
 * rows of 100 moments of one file). */
static struct row *
rows_cached(struct mfile *f, const struct ask *a, const struct site *v, size_t n, int at_peak,
	    size_t *nr, struct row_names *names) {
	struct row *r = NULL;
	size_t m = 0, cap = 0, nmap = 0, slots = (f->nstacks + 1) * NKINDS;
	struct namer nm = {0};
	if (!names->gid) {
		names->gid = xcalloc(f->nstacks + 1, sizeof *names->gid);
		names->label = xcalloc(f->nstacks + 1, sizeof *names->label);
		names->groups = xcalloc(1, sizeof *names->groups);
		names->rowof = xcalloc(slots, sizeof *names->rowof);
		names->stamp = xcalloc(slots, sizeof *names->stamp);
	}
	uint32_t call = ++names->call;
	int64_t *now = at_peak ? live_now_of(f, &nmap) : NULL;
	for (size_t i = 0; i < n; i++) {
		const struct site *s = &v[i];
		if (a->kind >= 0 && s->kind != a->kind)
			continue;
		int64_t live_now = s->live_bytes;
		if (now)
			live_now = s->stack < f->nstacks ? now[(size_t)s->stack * NKINDS + s->kind] : 0;
		if (!s->live_bytes && !live_now && !s->peak_bytes && !s->allocs)
			continue;
		uint32_t g = group_of(f, a, s->stack, &nm, names);
		size_t slot = (size_t)(g - 1) * NKINDS + s->kind;
		size_t k;
		if (names->stamp[slot] != call) {
			names->stamp[slot] = call;
			names->rowof[slot] = (uint32_t)m;
			k = m;
			r = xgrow(r, m + 1, &cap, sizeof *r);
			memset(&r[m], 0, sizeof r[m]);
			r[m].kind = s->kind;
			r[m].stack = s->stack;
			r[m].top = s->live_bytes;
			m++;
		} else {
			k = names->rowof[slot];
		}
		row_add(&r[k], s, live_now);
	}
	namer_free(&nm);
	free(now);
	for (size_t i = 0; i < m; i++) { /* the largest site's path, labelled once a stack */
		uint32_t st = r[i].stack;
		char **lab = &names->label[st];
		if (!*lab)
			*lab = site_label(f, xstrdup(names->by_stack[st]), st);
		r[i].name = xstrdup(*lab);
		if (!r[i].nsites) /* none holds bytes then: every site it has */
			r[i].nsites = r[i].nall;
	}
	if (m)
		xqsort(r, m, sizeof *r, cmp_row);
	*nr = m;
	return r;
}

struct row *
answer_rows_named(struct mfile *f, const struct ask *a, const struct site *v, size_t n,
		  int at_peak, size_t *nr, struct row_names *names) {
	if (names && (!names->by_stack || names->apart == a->apart) && f->nstacks < UINT32_MAX - 1) {
		int ok = 1; /* every stack in range: the caches index by it */
		for (size_t i = 0; i < n && ok; i++)
			ok = v[i].stack < f->nstacks;
		if (ok)
			return rows_cached(f, a, v, n, at_peak, nr, names);
	}
	struct row *r = NULL;
	size_t m = 0, cap = 0, nmap = 0;
	struct namer nm = {0};
	struct keyix ix = {0};
	int64_t *now = at_peak ? live_now_of(f, &nmap) : NULL;
	for (size_t i = 0; i < n; i++) {
		const struct site *s = &v[i];
		if (a->kind >= 0 && s->kind != a->kind)
			continue;
		int64_t live_now = s->live_bytes;
		if (now)
			live_now = s->stack < f->nstacks ? now[(size_t)s->stack * NKINDS + s->kind] : 0;
		if (!s->live_bytes && !live_now && !s->peak_bytes && !s->allocs)
			continue;
		char name[1024], key[1100];
		row_name(f, a, s->stack, name, sizeof name, &nm, names);
		/* the key: kind, name and, apart, the stack */
		int klen = snprintf(key, sizeof key, "%c%s%c%u", s->kind + 1, name, 1,
				    a->apart ? s->stack : 0);
		if (klen >= (int)sizeof key)
			klen = (int)sizeof key - 1;
		int fresh = 1;
		uint64_t *slot = keyix_slot(&ix, key, (size_t)klen, &fresh);
		size_t k = fresh ? m : *slot - 1;
		if (fresh) {
			r = xgrow(r, m + 1, &cap, sizeof *r);
			memset(&r[m], 0, sizeof r[m]);
			r[m].name = xstrdup(name);
			r[m].kind = s->kind;
			r[m].stack = s->stack;
			r[m].top = s->live_bytes;
			*slot = ++m;
		}
		row_add(&r[k], s, live_now);
	}
	keyix_free(&ix);
	namer_free(&nm);
	free(now);
	for (size_t i = 0; i < m; i++) /* the largest site's path */
		r[i].name = site_label(f, r[i].name, r[i].stack);
	for (size_t i = 0; i < m; i++)
		if (!r[i].nsites) /* none holds bytes then: every site it has */
			r[i].nsites = r[i].nall;
	if (m)
		xqsort(r, m, sizeof *r, cmp_row);
	*nr = m;
	return r;
}

struct row *
answer_rows_at(struct mfile *f, const struct ask *a, const struct snap **s, int *at_peak,
	       size_t *nr) {
	size_t n;
	struct site *v = answer_sites(f, a, s, at_peak, &n);
	struct row *r = answer_rows(f, a, v, n, *at_peak, nr);
	free(v);
	return r;
}

void
rows_free(struct row *r, size_t n) {
	for (size_t i = 0; i < n; i++)
		free(r[i].name);
	free(r);
}

/* ---- spikes ---- */

#define SPIKE_MIN (4 << 20)

/* The step in progress at ms: the mark's value at the last snapshot at
 * or before it (marks are the latest value when a snapshot is taken). */
static double
step_at(const struct mfile *f, int64_t ms) {
	const struct snap *last = f->nsnaps ? &f->snaps[f->nsnaps - 1] : NULL;
	if (!last || !last->nmarks || ms < 0)
		return NAN;
	const char *mark = NULL;
	for (int k = 0; k < last->nmarks && !mark; k++)
		if (!strcmp(last->marks[k].name, "step"))
			mark = "step";
	if (!mark)
		return NAN;
	double v = NAN;
	for (size_t i = 0; i < f->nsnaps && f->snaps[i].elapsed_ms <= ms; i++) {
		double x = snap_step(&f->snaps[i], mark);
		if (!isnan(x))
			v = x;
	}
	return v;
}

static int
cmp_spike(const void *x, const void *y) {
	const struct spike *a = x, *b = y;
	int64_t ea = a->r.peak - a->r.live, eb = b->r.peak - b->r.live;
	if (ea != eb)
		return ea < eb ? 1 : -1;
	return strcmp(a->r.name, b->r.name);
}

/* What each (stack, kind) held late in the run: the median of its live
 * bytes over up to 9 snapshots of the growth window's second half (a
 * leak holds most of its peak there; a spike, gone at once, holds ~0,
 * even when one snapshot caught it). */
#define LATE_PTS 9
static int
cmp_i64(const void *x, const void *y) {
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

/* late: (stack, kind) -> the median (see above); only the sites that
 * held bytes at one of the points have an entry. */
struct late {
	struct keyix ix;   /* (stack, kind) -> index + 1 into y */
	int64_t *y;        /* LATE_PTS values an entry */
	size_t n, cap, np;
};

static int64_t *
late_slot(struct late *l, uint32_t stack, int kind) {
	uint32_t key[2] = {stack, (uint32_t)kind};
	int fresh;
	uint64_t *slot = keyix_slot(&l->ix, (const char *)key, sizeof key, &fresh);
	if (fresh) {
		l->y = xgrow(l->y, (l->n + 1) * LATE_PTS, &l->cap, sizeof *l->y);
		memset(l->y + l->n * LATE_PTS, 0, LATE_PTS * sizeof *l->y);
		*slot = ++l->n;
	}
	return l->y + (*slot - 1) * LATE_PTS;
}

static void
held_late(struct mfile *f, const struct ask *a, struct late *l) {
	struct window w;
	answer_window(f, a->warmup, &w);
	if (w.end <= w.lo) { /* no window: the last snapshot */
		w.lo = f->nsnaps - 1;
		w.end = f->nsnaps;
	}
	size_t from = w.lo + (w.end - w.lo) / 2, cnt = w.end - from;
	l->np = cnt < LATE_PTS ? cnt : LATE_PTS;
	for (size_t q = 0; q < l->np; q++) {
		size_t at = from + (l->np > 1 ? q * (cnt - 1) / (l->np - 1) : cnt - 1), n;
		struct site *v = snap_sites(f, &f->snaps[at], &n);
		for (size_t i = 0; i < n; i++)
			if (v[i].live_bytes)
				late_slot(l, v[i].stack, v[i].kind)[q] = v[i].live_bytes;
		free(v);
	}
}

static int64_t
late_of(struct late *l, uint32_t stack, int kind) {
	uint32_t key[2] = {stack, (uint32_t)kind};
	int fresh;
	uint64_t *slot = keyix_slot(&l->ix, (const char *)key, sizeof key, &fresh);
	if (fresh) { /* held nothing late: a zero entry */
		l->y = xgrow(l->y, (l->n + 1) * LATE_PTS, &l->cap, sizeof *l->y);
		memset(l->y + l->n * LATE_PTS, 0, LATE_PTS * sizeof *l->y);
		*slot = ++l->n;
		return 0;
	}
	int64_t y[LATE_PTS];
	memcpy(y, l->y + (*slot - 1) * LATE_PTS, l->np * sizeof *y);
	xqsort(y, l->np, sizeof *y, cmp_i64);
	return l->np ? y[l->np / 2] : 0;
}

size_t
answer_spikes(struct mfile *f, const struct ask *a, struct spike *out, size_t max) {
	if (!f->nsnaps || !max)
		return 0;
	struct late late = {0};
	held_late(f, a, &late);
	const struct snap *last = &f->snaps[f->nsnaps - 1];
	size_t n;
	struct site *v = snap_sites(f, last, &n);
	struct spike *sp = NULL;
	size_t m = 0, cap = 0;
	struct namer nm = {0};
	struct keyix ix = {0};
	for (size_t i = 0; i < n; i++) {
		const struct site *s = &v[i];
		if (a->kind >= 0 && s->kind != a->kind)
			continue;
		/* the site's own high-water mark against its bytes at the
		 * process peak (or, in files without them, at the end) and
		 * late in the run (so a leak that grew past the process peak
		 * is no spike) */
		int64_t held = s->at_peak_bytes >= 0 ? s->at_peak_bytes : s->live_bytes;
		if (s->peak_bytes - held < SPIKE_MIN || s->peak_bytes < 2 * held)
			continue;
		int64_t lt = late_of(&late, s->stack, s->kind);
		int64_t most = held > lt ? held : lt;
		if (s->peak_bytes - most < SPIKE_MIN || s->peak_bytes < 2 * most)
			continue;
		char key[1100], *name = key + 1;
		key[0] = (char)(s->kind + 1);
		site_group_name(f, s->stack, name, sizeof key - 1, &nm);
		int fresh = 1;
		uint64_t *slot = keyix_slot(&ix, key, 1 + strlen(name), &fresh);
		struct spike *t;
		if (fresh) {
			sp = xgrow(sp, m + 1, &cap, sizeof *sp);
			t = &sp[m];
			memset(t, 0, sizeof *t);
			t->r.name = site_label(f, xstrdup(name), s->stack);
			*slot = ++m;
		} else {
			t = &sp[*slot - 1];
			if (s->peak_bytes - held <= t->r.peak - t->r.live) {
				t->r.nsites++;
				continue;
			}
		}
		/* a row keeps its sites' largest spike */
		t->r.kind = s->kind;
		t->r.stack = s->stack;
		t->r.nsites++;
		t->r.peak = s->peak_bytes;
		t->r.live = held;
		t->r.live_now = s->live_bytes;
		t->r.allocs = s->allocs;
		t->r.alloc_bytes = s->alloc_bytes;
		t->peak_ms = s->peak_ms;
		t->step = !isnan(s->peak_step) ? s->peak_step : step_at(f, s->peak_ms);
		t->phase = answer_phase_at(f, s->peak_ms, NULL);
	}
	keyix_free(&ix);
	namer_free(&nm);
	free(v);
	keyix_free(&late.ix);
	free(late.y);
	if (m)
		xqsort(sp, m, sizeof *sp, cmp_spike);
	size_t k = m < max ? m : max;
	if (k) /* memcpy(out, NULL, 0) is undefined (sp is NULL without spikes) */
		memcpy(out, sp, k * sizeof *out);
	for (size_t i = k; i < m; i++)
		free(sp[i].r.name);
	free(sp);
	return k;
}

void
spikes_free(struct spike *v, size_t n) {
	for (size_t i = 0; i < n; i++)
		free(v[i].r.name);
}
