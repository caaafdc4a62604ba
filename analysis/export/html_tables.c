/* html_tables.c — the data by call site of `memtally html`'s page, per
 * process (html_int.h): the stacked timeline (the rows that held the most
 * at any kept snapshot, the rest as "other", leak suspects marked) and the
 * call-site table at the opening moment and at the kept snapshots the
 * page's control moves through, rows and frames written once a process.
 * Rows are call sites grouped by the name report gives them (answer/). */
#include "export/html_int.h"
#include "answer/sites.h"
#include "read/symbolize.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The timeline by call site: live bytes of the rows (call sites grouped
 * by the name report gives them, as the table's) that held the most at
 * any kept snapshot (STACK_ROWS of them), the rest as "other", at each
 * kept snapshot; leak suspects (as `leaks` ranks them) marked. */
#define STACK_ROWS 12

/* (stack, kind) -> its row, each stack named once */
struct rowmap {
	uint32_t *id;            /* stack * NKINDS + kind -> row + 1 */
	struct keyix ix;         /* kind byte, name -> row + 1 */
	struct { char *name; uint32_t stack; int kind, nsites; int64_t sum, max; } *r;
	size_t n, cap;
	struct namer nm;
};

static size_t
rowmap_get(struct rowmap *m, struct mfile *f, uint32_t stack, int kind) {
	if (!m->id)
		m->id = xcalloc(f->nstacks * NKINDS + 1, sizeof *m->id);
	size_t at = stack < f->nstacks ? (size_t)stack * NKINDS + (size_t)kind : 0;
	if (at && m->id[at])
		return m->id[at] - 1;
	char key[1100];
	key[0] = (char)(kind + 1);
	site_group_name(f, stack, key + 1, sizeof key - 1, &m->nm);
	int fresh;
	uint64_t *slot = keyix_slot(&m->ix, key, 1 + strlen(key + 1), &fresh);
	if (fresh) {
		m->r = xgrow(m->r, m->n + 1, &m->cap, sizeof *m->r);
		memset(&m->r[m->n], 0, sizeof m->r[m->n]);
		m->r[m->n].name = site_label(f, xstrdup(key + 1), stack);
		m->r[m->n].stack = stack;
		m->r[m->n].kind = kind;
		*slot = ++m->n;
	}
	size_t k = (size_t)*slot - 1;
	if (at) {
		m->id[at] = (uint32_t)k + 1;
		m->r[k].nsites++;
	}
	return k;
}

static void
rowmap_free(struct rowmap *m) {
	for (size_t i = 0; i < m->n; i++)
		free(m->r[i].name);
	free(m->r);
	free(m->id);
	keyix_free(&m->ix);
	namer_free(&m->nm);
}

/* Pass 1, one pass over the file's call-site records up to the last kept
 * snapshot, as written (a delta snapshot costs what it changed; each kept
 * snapshot's whole table was walked before: rows x snapshots): each
 * (stack, kind)'s live bytes now and at the last kept snapshot; at each
 * kept snapshot the sites that changed since move their rows' sums, the
 * rows' maxima follow, and the moves are kept in ss for pass 2.  A site
 * gets its row (rowmap_get) at the first kept snapshot where it holds
 * bytes, in the replay's order, so rows are made in the order a walk of
 * each snapshot's table made them. */
struct rowsum { uint32_t row; int64_t bytes; }; /* bytes: the row's move */
struct sums { struct rowsum *v; size_t n, cap, *at; };

struct replay {
	int64_t *live, *seen;  /* by key: now, and in its row's sum (>= 0) */
	uint32_t *ord;         /* by key: place in the replay's order + 1 */
	uint8_t *dirty;
	uint32_t *state, *changed; /* keys in the replay's state; changed since the last kept */
	size_t nstate, scap, nchanged, ccap;
};

static uint32_t
key_of(uint32_t stack, int kind) {
	return stack * NKINDS + (uint32_t)kind;
}

/* key's row when it has one cached, else -1 (rowmap_get caches none for
 * its at 0: stack 0's first kind) */
static ptrdiff_t
key_row(const struct rowmap *rm, uint32_t key) {
	return key && rm->id && rm->id[key] ? (ptrdiff_t)rm->id[key] - 1 : -1;
}

static void
mark(struct replay *R, uint32_t key) {
	if (!R->dirty[key]) {
		R->dirty[key] = 1;
		R->changed = xgrow(R->changed, R->nchanged + 1, &R->ccap, sizeof *R->changed);
		R->changed[R->nchanged++] = key;
	}
}

static void
replay_snap(struct replay *R, const struct snap *s) {
	if (s->mode != SITES_DELTA) { /* a whole table: what it leaves out is gone */
		for (size_t i = 0; i < R->nstate; i++) {
			uint32_t k = R->state[i];
			R->ord[k] = 0;
			if (R->live[k]) {
				R->live[k] = 0;
				mark(R, k);
			}
		}
		R->nstate = 0;
	}
	for (size_t i = 0; i < s->nsites; i++) {
		uint32_t k = key_of(s->sites[i].stack, s->sites[i].kind);
		if (!R->ord[k]) {
			R->state = xgrow(R->state, R->nstate + 1, &R->scap, sizeof *R->state);
			R->state[R->nstate++] = k;
			R->ord[k] = (uint32_t)R->nstate;
		}
		R->live[k] = s->sites[i].live_bytes;
		mark(R, k);
	}
}

static const struct replay *by_ord;
static int
cmp_ord(const void *a, const void *b) {
	uint32_t x = by_ord->ord[*(const uint32_t *)a], y = by_ord->ord[*(const uint32_t *)b];
	return (x > y) - (x < y);
}

/* A kept snapshot: the sites changed since the last one move their rows. */
static void
kept_snap(struct replay *R, struct rowmap *rm, struct mfile *f, struct sums *ss) {
	size_t from = ss->n, nn = 0; /* sites holding bytes without a row yet: first, in order */
	for (size_t i = 0; i < R->nchanged; i++) {
		uint32_t k = R->changed[i];
		if (R->live[k] > 0 && key_row(rm, k) < 0)
			R->changed[i] = R->changed[nn], R->changed[nn++] = k;
	}
	by_ord = R;
	xqsort(R->changed, nn, sizeof *R->changed, cmp_ord);
	for (size_t i = 0; i < R->nchanged; i++) {
		uint32_t k = R->changed[i];
		R->dirty[k] = 0;
		int64_t now = R->live[k] > 0 ? R->live[k] : 0;
		ptrdiff_t row = key_row(rm, k);
		if (row < 0 && (now > 0 || R->seen[k] > 0)) /* (rm->r may move) */
			row = (ptrdiff_t)rowmap_get(rm, f, k / NKINDS, (int)(k % NKINDS));
		if (row < 0 || now == R->seen[k])
			continue;
		int64_t d = now - R->seen[k];
		R->seen[k] = now;
		rm->r[row].sum += d;
		ss->v = xgrow(ss->v, ss->n + 1, &ss->cap, sizeof *ss->v);
		ss->v[ss->n++] = (struct rowsum){(uint32_t)row, d};
	}
	R->nchanged = 0;
	/* the maxima once every move is in (a row's sites may move both ways) */
	for (size_t i = from; i < ss->n; i++) {
		uint32_t row = ss->v[i].row;
		if (rm->r[row].sum > rm->r[row].max)
			rm->r[row].max = rm->r[row].sum;
	}
}

static void
rows_max(struct rowmap *rm, struct mfile *f, const size_t *idx, size_t m, struct sums *ss) {
	ss->at = xmalloc((m + 1) * sizeof *ss->at);
	size_t nkey = f->nstacks * NKINDS + 1;
	struct replay R = {.live = xcalloc(nkey, sizeof *R.live), .seen = xcalloc(nkey, sizeof *R.seen),
			   .ord = xcalloc(nkey, sizeof *R.ord), .dirty = xcalloc(nkey, 1)};
	for (size_t q = 0, i = 0; q < m; q++) {
		for (; i <= idx[q]; i++)
			replay_snap(&R, &f->snaps[i]);
		ss->at[q] = ss->n;
		kept_snap(&R, rm, f, ss);
	}
	ss->at[m] = ss->n;
	free(R.live), free(R.seen), free(R.ord), free(R.dirty), free(R.state), free(R.changed);
}

/* The STACK_ROWS rows that held the most, most first, into top; how many. */
static size_t
rows_top(const struct rowmap *rm, size_t *top) {
	size_t nt = 0;
	for (size_t k = 0; k < rm->n; k++) {
		if (rm->r[k].max <= 0)
			continue;
		size_t at = nt < STACK_ROWS ? nt++ : STACK_ROWS;
		if (at == STACK_ROWS) {
			if (rm->r[k].max <= rm->r[top[STACK_ROWS - 1]].max)
				continue;
			at = STACK_ROWS - 1;
		}
		top[at] = k;
		while (at > 0 && rm->r[top[at]].max > rm->r[top[at - 1]].max) {
			size_t x = top[at];
			top[at] = top[at - 1];
			top[--at] = x;
		}
	}
	return nt;
}

/* Pass 2: the series, band k (the top rows, then "other") at kept
 * snapshot q in y[k * m + q], from pass 1's moves. */
static int64_t *
rows_series(const struct rowmap *rm, size_t m, const size_t *top, size_t nt, const struct sums *ss) {
	int64_t *y = xcalloc((nt + 1) * (m ? m : 1), sizeof *y), *now = xcalloc(nt + 1, sizeof *now);
	size_t *band = xmalloc((rm->n + 1) * sizeof *band);
	for (size_t k = 0; k < rm->n; k++)
		band[k] = nt; /* other */
	for (size_t k = 0; k < nt; k++)
		band[top[k]] = k;
	for (size_t q = 0; q < m; q++) {
		for (size_t i = ss->at[q]; i < ss->at[q + 1]; i++)
			now[band[ss->v[i].row]] += ss->v[i].bytes;
		for (size_t k = 0; k <= nt; k++)
			y[k * m + q] = now[k];
	}
	free(band);
	free(now);
	return y;
}

/* One band: a top row (rm->r[row]), or "other" (row: none, -1). */
static void
band_json(struct sb *j, struct mfile *f, const struct rowmap *rm, const struct leaks *l,
	  ptrdiff_t row, const int64_t *y, size_t m) {
	char name[1100];
	int suspect = 0;
	int kind = row >= 0 ? rm->r[row].kind : -1;
	for (size_t q = 0; q < l->n && q < 10 && row >= 0; q++)
		suspect |= site_same_row(l->v[q].r.name, rm->r[row].name) && l->v[q].r.kind == kind;
	if (row >= 0)
		site_row_name(&(struct site_row){.name = rm->r[row].name, .nsites = rm->r[row].nsites}, 0, 1,
			      name, sizeof name);
	sb_puts(j, "{\"where\":");
	sb_json_str(j, row >= 0 ? name : "other");
	sb_printf(j, ",\"kind\":\"%s\",\"suspect\":%s,\"frames\":[", row >= 0 ? kind_names[kind] : "",
		  suspect ? "true" : "false");
	struct frame fr[256];
	int nf = row >= 0 ? site_frames(f, rm->r[row].stack, fr, 256) : 0;
	for (int q = 0; q < nf; q++) {
		if (q)
			sb_putc(j, ',');
		sb_json_str(j, sym_text(&fr[q], name, sizeof name, 1));
	}
	sb_puts(j, "],\"y\":[");
	for (size_t q = 0; q < m; q++) {
		if (q)
			sb_putc(j, ',');
		sb_i64(j, (long long)y[q]);
	}
	sb_puts(j, "]}");
}

void
html_stack_json(struct sb *j, struct mfile *f, const struct leaks *l, const size_t *idx, size_t m) {
	struct rowmap rm = {0};
	struct sums ss = {0};
	rows_max(&rm, f, idx, m, &ss);
	size_t top[STACK_ROWS], nt = rows_top(&rm, top);
	int64_t *y = rows_series(&rm, m, top, nt, &ss);
	free(ss.v);
	free(ss.at);
	sb_puts(j, ",\"stack\":{\"sites\":[");
	for (size_t k = 0; k <= nt; k++) {
		if (k)
			sb_putc(j, ',');
		band_json(j, f, &rm, l, k < nt ? (ptrdiff_t)top[k] : -1, y + k * m, m);
	}
	sb_puts(j, "]}");
	free(y);
	rowmap_free(&rm);
}

/* ---- the call-site table at several moments ----
 * The page opens on the peak (answer.h's moment: each call site's bytes
 * when its kind was at its high-water mark), or on a file's own FILE@N;
 * a control moves the table through up to TABLE_SNAPS of the kept
 * snapshots.  The rows are answer_rows' (grouped by the user's line, as
 * report names them), PEAK_ROWS of them at the opening moment and
 * TABLE_ROWS at each snapshot, the rest summed.  Row names and frames are
 * written once per process (a dictionary of rows, and of frame texts:
 * PyTorch's stacks repeat the same 60 frames). */
#define TABLE_SNAPS 100
#define TABLE_ROWS 200
#define PEAK_ROWS 1000

struct dict {
	struct keyix rows, frames;
	size_t nrows, nframes;
	struct sb r, f; /* the JSON arrays' contents */
};

static size_t
dict_frame(struct dict *d, const char *text) {
	int fresh;
	uint64_t *slot = keyix_slot(&d->frames, text, strlen(text), &fresh);
	if (fresh) {
		if (d->nframes)
			sb_putc(&d->f, ',');
		sb_json_str(&d->f, text);
		*slot = ++d->nframes;
	}
	return (size_t)*slot - 1;
}

static size_t
dict_row(struct dict *d, struct mfile *f, const struct row *r) {
	int fresh;
	uint64_t *slot = row_slot(&d->rows, r, &fresh);
	if (fresh) {
		sb_printf(&d->r, "%s{\"w\":", d->nrows ? "," : "");
		sb_json_str(&d->r, r->name);
		sb_printf(&d->r, ",\"k\":\"%s\",\"f\":[", kind_names[r->kind]);
		struct frame fr[256];
		char t[1024];
		int nf = site_frames(f, r->stack, fr, 256);
		for (int q = 0; q < nf; q++) {
			size_t fi = dict_frame(d, sym_text(&fr[q], t, sizeof t, 1));
			if (q)
				sb_putc(&d->r, ',');
			sb_i64(&d->r, (long long)fi);
		}
		sb_puts(&d->r, "]}");
		*slot = ++d->nrows;
	}
	return (size_t)*slot - 1;
}

/* One moment's table: its rows (those holding bytes then), the first
 * limit of them as [row, live, count (at the exact peak: live at the
 * end), allocs, allocated, sites], the rest summed. */
static void
table_json(struct sb *j, struct dict *d, struct mfile *f, const struct snap *s, int exact,
	   const char *name, const struct row *r, size_t nr, size_t limit) {
	int64_t total = 0, rest = 0;
	size_t held = 0, shown = 0;
	sb_puts(j, "{\"seq\":");
	if (s)
		sb_printf(j, "%lld,\"t\":%lld,\"reason\":", (long long)s->seq, (long long)s->elapsed_ms);
	else
		sb_puts(j, "null,\"t\":null,\"reason\":");
	sb_json_str(j, s ? s->reason : "");
	sb_printf(j, ",\"exact\":%s,\"name\":", exact ? "true" : "false");
	sb_json_str(j, name);
	if (s && s->nmarks) {
		sb_puts(j, ",\"step\":");
		sb_json_num(j, "%g", s->marks[0].value);
	}
	sb_puts(j, ",\"r\":[");
	for (size_t i = 0; i < nr; i++) {
		if (r[i].live <= 0)
			continue;
		held++;
		total += r[i].live;
		if (shown >= limit) {
			rest += r[i].live;
			continue;
		}
		long long cell[6] = {(long long)dict_row(d, f, &r[i]), (long long)r[i].live,
				     (long long)(exact ? r[i].live_now : r[i].count), (long long)r[i].allocs,
				     (long long)r[i].alloc_bytes, r[i].nsites};
		sb_puts(j, shown ? ",[" : "[");
		for (int c = 0; c < 6; c++) {
			if (c)
				sb_putc(j, ',');
			sb_i64(j, cell[c]);
		}
		sb_putc(j, ']');
		shown++;
	}
	sb_printf(j, "],\"rows\":%zu,\"total\":%lld,\"rest\":%lld}", held, (long long)total,
		  (long long)rest);
}

void
html_moments_json(struct sb *j, struct mfile *f, struct opts *o, const size_t *idx, size_t m) {
	struct dict d = {0};
	struct row_names names = {0};
	sb_puts(j, ",\"tables\":[");
	if (f->nsnaps) {
		/* the moment the page opens on: the peak, or FILE@N */
		const struct snap *s;
		int at_peak;
		size_t n, nr;
		struct site *v = answer_sites(f, &o->ask, &s, &at_peak, &n);
		struct row *r = answer_rows_named(f, &o->ask, v, n, at_peak, &nr, &names);
		free(v);
		table_json(j, &d, f, at_peak ? NULL : s, at_peak, answer_moment_name(f, &o->ask), r,
			   nr, PEAK_ROWS);
		rows_free(r, nr);
		/* the snapshots the control moves through: evenly spaced among
		 * the kept ones, the first, the last and the fullest kept */
		const struct snap *pk = file_peak(f, o->ask.kind);
		struct ask a = o->ask;
		for (size_t q = 0; q < m; q++) {
			const struct snap *sn = &f->snaps[idx[q]];
			if (!(m <= TABLE_SNAPS || q == 0 || q == m - 1 || sn == pk ||
			      q * (TABLE_SNAPS - 3) / m != (q + 1) * (TABLE_SNAPS - 3) / m))
				continue;
			const struct site *cv = snap_sites_view(f, sn, &n);
			r = answer_rows_named(f, &a, cv, n, 0, &nr, &names);
			char name[48];
			snprintf(name, sizeof name, "at snapshot %lld", (long long)sn->seq);
			sb_putc(j, ',');
			table_json(j, &d, f, sn, 0, name, r, nr, TABLE_ROWS);
			rows_free(r, nr);
		}
	}
	sb_puts(j, "],\"rows\":[");
	if (d.r.len)
		sb_puts_n(j, d.r.p, d.r.len);
	sb_puts(j, "],\"frames\":[");
	if (d.f.len)
		sb_puts_n(j, d.f.p, d.f.len);
	sb_putc(j, ']');
	row_names_free(&names);
	keyix_free(&d.rows);
	keyix_free(&d.frames);
	sb_free(&d.r);
	sb_free(&d.f);
}
