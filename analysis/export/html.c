/* html.c — `memtally html RUN_DIR -o report.html`: one self-contained page
 * (data, CSS and JS inline; nothing fetched).  On a run of several
 * processes it opens on a summary, one row per process as `memtally ranks`
 * compares them (answer/ranks.h), the outliers named, and the detail of
 * the first outlier (else of the process that peaked highest).  Per
 * process: a timeline of RSS, PSS, heap, mmap, file mappings, CUDA per
 * device and cgroup usage with snapshot reasons and marks; the timeline by
 * row; the leak suspects (answer_leaks, as `leaks` ranks them) and spikes
 * (answer_spikes, as `report` lists them); the flame graph and the
 * call-site table at the peak (answer.h's moment; a file's FILE@N wins),
 * the table grouped by the user's line (answer_rows) and movable through
 * the kept snapshots; for each OOM dump a segment map coloured by call
 * site and the events before it.  Large runs are cut down here, and the
 * page says so: at most 1000 snapshots a process on the timelines (evenly
 * spaced, the first, last and peak kept), 100 of them in the table's
 * control (TABLE_SNAPS), 1000 rows at the peak and 200 at each snapshot
 * (the rest summed), one flame graph a process (at the opening moment),
 * 20000 segments and events a dump.  Views and exports do not call each
 * other: what a view prints comes from answer/. */
#include "cmd/cmd.h"
#include "export/html_join.h"
#include "export/flame.h"
#include "export/html_page.h"
#include "answer/ranks.h"
#include "answer/sites.h"
#include "answer/stats.h"
#include "read/symbolize.h"
#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#define MAX_SNAPS 1000
#define MAX_SEGS 20000

static void
num_or_null(struct sb *j, int64_t v, int present) {
	if (present)
		sb_printf(j, "%lld", (long long)v);
	else
		sb_puts(j, "null");
}

/* "Growth starts at step N": the split of live heap + mmap bytes (a running
 * median of 5) over the snapshots into a flat part and a rising straight
 * line that fits best
 * (least squares over every split), reported when the line rises by more
 * than 10% of where it starts, at the first mark value of the rising part. */
static void
growth_start(struct sb *j, const struct mfile *f) {
	size_t n = f->nsnaps;
	if (n < 6 || !f->snaps[n - 1].nmarks)
		return;
	double *y = xmalloc(n * sizeof *y), *x = xmalloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++) {
		/* a running median of 5 first: a checkpoint's transient
		 * mapping in one snapshot must not bend the line */
		double w[5];
		size_t m = 0;
		for (size_t q = i >= 2 ? i - 2 : 0; q <= i + 2 && q < n; q++)
			w[m++] = (double)(f->snaps[q].tot[K_HEAP].live_bytes +
					  f->snaps[q].tot[K_MMAP].live_bytes);
		y[i] = median(w, m);
		x[i] = (double)f->snaps[i].elapsed_ms;
	}
	/* Every split k: flat mean before, least-squares line from k on; the
	 * split with the least squared error wins.  Prefix and suffix sums
	 * make it linear (it was quadratic: 18 s for 100 k snapshots), on
	 * values centred first so the sums of squares keep their precision. */
	double x0 = 0, y0 = 0, xs = 1, ys = 1, xlo = x[0], xhi = x[0], ylo = y[0], yhi = y[0];
	for (size_t i = 0; i < n; i++) {
		x0 += x[i] / (double)n, y0 += y[i] / (double)n;
		xlo = fmin(xlo, x[i]), xhi = fmax(xhi, x[i]), ylo = fmin(ylo, y[i]), yhi = fmax(yhi, y[i]);
	}
	if (xhi > xlo)
		xs = xhi - xlo;
	if (yhi > ylo)
		ys = yhi - ylo;
	double *py = xmalloc((n + 1) * sizeof *py), *pyy = xmalloc((n + 1) * sizeof *pyy);
	double *sx = xmalloc((n + 1) * sizeof *sx), *sy = xmalloc((n + 1) * sizeof *sy);
	double *sxx = xmalloc((n + 1) * sizeof *sxx), *sxy = xmalloc((n + 1) * sizeof *sxy);
	double *syy = xmalloc((n + 1) * sizeof *syy);
	py[0] = pyy[0] = 0;
	for (size_t i = 0; i < n; i++) {
		double yc = (y[i] - y0) / ys;
		py[i + 1] = py[i] + yc;
		pyy[i + 1] = pyy[i] + yc * yc;
	}
	sx[n] = sy[n] = sxx[n] = sxy[n] = syy[n] = 0;
	for (size_t i = n; i-- > 0;) {
		double xc = (x[i] - x0) / xs, yc = (y[i] - y0) / ys;
		sx[i] = sx[i + 1] + xc;
		sy[i] = sy[i + 1] + yc;
		sxx[i] = sxx[i + 1] + xc * xc;
		sxy[i] = sxy[i + 1] + xc * yc;
		syy[i] = syy[i + 1] + yc * yc;
	}
	double best = -1, slope_b = 0, icpt_b = 0;
	size_t k_b = 0;
	for (size_t k = 0; k + 3 <= n; k++) {
		double sse = k ? pyy[k] - py[k] * py[k] / (double)k : 0;
		double c = (double)(n - k);
		double den = c * sxx[k] - sx[k] * sx[k];
		double b = den > 0 ? (c * sxy[k] - sx[k] * sy[k]) / den : 0, a = (sy[k] - b * sx[k]) / c;
		sse += syy[k] - 2 * a * sy[k] - 2 * b * sxy[k] + c * a * a + 2 * a * b * sx[k] +
		       b * b * sxx[k];
		if (best < 0 || sse < best)
			best = sse, k_b = k, slope_b = b, icpt_b = a;
	}
	/* back from centred, scaled values: y = icpt + slope * x */
	slope_b = slope_b * ys / xs;
	icpt_b = icpt_b * ys + y0 - slope_b * x0;
	free(py), free(pyy), free(sx), free(sy), free(sxx), free(sxy), free(syy);
	double from = icpt_b + slope_b * x[k_b], to = icpt_b + slope_b * x[n - 1];
	free(x);
	free(y);
	if (slope_b <= 0 || to <= from * 1.1 || from < 0)
		return;
	const char *name = f->snaps[n - 1].marks[0].name;
	for (size_t i = k_b; i < n; i++)
		for (int k = 0; k < f->snaps[i].nmarks; k++)
			if (!strcmp(f->snaps[i].marks[k].name, name)) {
				char a[16], b[16];
				struct sb t = {0};
				sb_printf(&t, "Growth starts at %s %g: live heap and mmap bytes rise "
					      "steadily from about %s to %s after it.",
					  name, f->snaps[i].marks[k].value, human((int64_t)from, a),
					  human((int64_t)to, b));
				sb_puts(j, ",\"marks_start\":");
				sb_json_str(j, t.p);
				sb_free(&t);
				sb_puts(j, ",\"growth_step\":");
				sb_json_num(j, "%g", f->snaps[i].marks[k].value);
				return;
			}
}

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
		m->r[m->n].name = xstrdup(key + 1);
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

static void
stack_json(struct sb *j, struct mfile *f, const struct leaks *l, const size_t *idx, size_t m) {
	struct rowmap rm = {0};
	/* pass 1: each row's most live bytes over the kept snapshots (the
	 * replay goes forward, so this is one pass over the file's deltas) */
	for (size_t q = 0; q < m; q++) {
		size_t n;
		struct site *v = snap_sites(f, &f->snaps[idx[q]], &n);
		for (size_t i = 0; i < n; i++) {
			if (v[i].live_bytes <= 0)
				continue;
			size_t k = rowmap_get(&rm, f, v[i].stack, v[i].kind); /* (rm.r may move) */
			rm.r[k].sum += v[i].live_bytes;
		}
		for (size_t k = 0; k < rm.n; k++) {
			if (rm.r[k].sum > rm.r[k].max)
				rm.r[k].max = rm.r[k].sum;
			rm.r[k].sum = 0;
		}
		free(v);
	}
	size_t top[STACK_ROWS], nt = 0;
	for (size_t k = 0; k < rm.n; k++) { /* the STACK_ROWS largest */
		if (rm.r[k].max <= 0)
			continue;
		size_t at = nt < STACK_ROWS ? nt++ : STACK_ROWS;
		if (at == STACK_ROWS) {
			if (rm.r[k].max <= rm.r[top[STACK_ROWS - 1]].max)
				continue;
			at = STACK_ROWS - 1;
		}
		top[at] = k;
		while (at > 0 && rm.r[top[at]].max > rm.r[top[at - 1]].max) {
			size_t x = top[at];
			top[at] = top[at - 1];
			top[--at] = x;
		}
	}
	/* pass 2: the series */
	int64_t *y = xcalloc((nt + 1) * (m ? m : 1), sizeof *y);
	size_t nband = rm.n, *band = xmalloc((nband + 1) * sizeof *band);
	for (size_t k = 0; k < rm.n; k++)
		band[k] = nt; /* other */
	for (size_t k = 0; k < nt; k++)
		band[top[k]] = k;
	for (size_t q = 0; q < m; q++) {
		size_t n;
		struct site *v = snap_sites(f, &f->snaps[idx[q]], &n);
		for (size_t i = 0; i < n; i++) {
			if (v[i].live_bytes <= 0)
				continue;
			size_t k = rowmap_get(&rm, f, v[i].stack, v[i].kind);
			y[(k < nband ? band[k] : nt) * m + q] += v[i].live_bytes;
		}
		free(v);
	}
	char name[1100];
	sb_puts(j, ",\"stack\":{\"sites\":[");
	for (size_t k = 0; k <= nt; k++) {
		if (k)
			sb_putc(j, ',');
		int suspect = 0;
		int kind = k < nt ? rm.r[top[k]].kind : -1;
		for (size_t q = 0; q < l->n && q < 10 && k < nt; q++)
			suspect |= !strcmp(l->v[q].r.name, rm.r[top[k]].name) && l->v[q].r.kind == kind;
		if (k < nt)
			site_row_name(&(struct site_row){.name = rm.r[top[k]].name,
							 .nsites = rm.r[top[k]].nsites},
				      0, 1, name, sizeof name);
		sb_puts(j, "{\"where\":");
		sb_json_str(j, k < nt ? name : "other");
		sb_printf(j, ",\"kind\":\"%s\",\"suspect\":%s,\"frames\":[", k < nt ? kind_names[kind] : "",
			  suspect ? "true" : "false");
		struct frame fr[256];
		int nf = k < nt ? site_frames(f, rm.r[top[k]].stack, fr, 256) : 0;
		for (int q = 0; q < nf; q++) {
			if (q)
				sb_putc(j, ',');
			sb_json_str(j, sym_text(&fr[q], name, sizeof name, 1));
		}
		sb_puts(j, "],\"y\":[");
		for (size_t q = 0; q < m; q++)
			sb_printf(j, "%s%lld", q ? "," : "", (long long)y[k * m + q]);
		sb_puts(j, "]}");
	}
	sb_puts(j, "]}");
	free(y);
	free(band);
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
		for (int q = 0; q < nf; q++)
			sb_printf(&d->r, "%s%zu", q ? "," : "",
				  dict_frame(d, sym_text(&fr[q], t, sizeof t, 1)));
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
		sb_printf(j, "%s[%zu,%lld,%lld,%lld,%lld,%d]", shown ? "," : "", dict_row(d, f, &r[i]),
			  (long long)r[i].live,
			  (long long)(exact ? r[i].live_now : r[i].count), (long long)r[i].allocs,
			  (long long)r[i].alloc_bytes, r[i].nsites);
		shown++;
	}
	sb_printf(j, "],\"rows\":%zu,\"total\":%lld,\"rest\":%lld}", held, (long long)total,
		  (long long)rest);
}

static void
moments_json(struct sb *j, struct mfile *f, struct opts *o, const size_t *idx, size_t m) {
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
			v = snap_sites(f, sn, &n);
			r = answer_rows_named(f, &a, v, n, 0, &nr, &names);
			free(v);
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

/* ---- what report and leaks name: spikes and leak suspects ---- */
#define PAGE_SPIKES 20
#define PAGE_LEAKS 10

static void
findings_json(struct sb *j, struct mfile *f, struct opts *o, const struct leaks *l) {
	struct spike sp[PAGE_SPIKES];
	size_t n = answer_spikes(f, &o->ask, sp, PAGE_SPIKES);
	sb_puts(j, ",\"spikes\":[");
	for (size_t i = 0; i < n; i++) {
		sb_puts(j, i ? ",{\"w\":" : "{\"w\":");
		sb_json_str(j, sp[i].r.name);
		sb_printf(j, ",\"k\":\"%s\",\"sites\":%d,\"peak\":%lld,\"live\":%lld,\"ms\":",
			  kind_names[sp[i].r.kind], sp[i].r.nsites, (long long)sp[i].r.peak,
			  (long long)sp[i].r.live);
		sb_json_num(j, "%.0f", sp[i].peak_ms >= 0 ? (double)sp[i].peak_ms : NAN);
		sb_puts(j, ",\"step\":");
		sb_json_num(j, "%.0f", sp[i].step);
		sb_putc(j, '}');
	}
	spikes_free(sp, n);
	char a[16], g[48], win[96];
	sb_printf(j, "],\"leaks\":{\"points\":%zu,\"examined\":%zu,\"window\":", l->npts, l->examined);
	if (l->mark)
		snprintf(win, sizeof win, "steps %.0f-%.0f, %zu snapshots", l->win.step_lo,
			 l->win.step_hi, l->npts);
	else
		snprintf(win, sizeof win, "%zu snapshots after start-up, before teardown", l->npts);
	sb_json_str(j, win);
	sb_puts(j, ",\"suspects\":[");
	for (size_t i = 0; i < l->n && i < PAGE_LEAKS; i++) {
		const struct leak *t = &l->v[i];
		sb_puts(j, i ? ",{\"w\":" : "{\"w\":");
		sb_json_str(j, t->r.name);
		sb_printf(j, ",\"k\":\"%s\",\"sites\":%d,\"growth\":", kind_names[t->r.kind],
			  t->r.nsites);
		sb_json_str(j, rate_text(t->per_hour, NAN, l->pts[l->npts - 1]->elapsed_ms - t->from_ms,
					 1, g, sizeof g));
		sb_puts(j, ",\"per_step\":");
		sb_json_str(j, l->mark ? human((int64_t)llround(t->per_step), a) : "");
		sb_printf(j, ",\"fit\":%.2f,\"share\":%.4f,\"live\":%lld}", t->tau, t->share,
			  (long long)t->r.live);
	}
	sb_printf(j, "],\"more\":%zu}", l->n > PAGE_LEAKS ? l->n - PAGE_LEAKS : 0);
}

static void
process_json(struct sb *j, struct mfile *f, struct opts *o) {
	char lab[128];
	sb_puts(j, "{\"label\":");
	sb_json_str(j, file_label(f, lab, sizeof lab));
	sb_puts(j, ",\"argv\":");
	sb_json_str(j, f->argv);
	sb_printf(j, ",\"rank\":%lld,\"pid\":%lld", (long long)f->rank, (long long)f->pid);
	/* which snapshots: all, or evenly spaced with the first, last, peak */
	size_t n = f->nsnaps, *idx = xmalloc((n + 1) * sizeof *idx), m = 0;
	const struct snap *pk = file_peak(f, -1);
	for (size_t i = 0; i < n; i++) {
		int keep = n <= MAX_SNAPS || i == 0 || i == n - 1 || &f->snaps[i] == pk ||
			   (i * (MAX_SNAPS - 3) / n != (i + 1) * (MAX_SNAPS - 3) / n);
		if (keep)
			idx[m++] = i;
	}
	sb_printf(j, ",\"nsnaps\":%zu,\"downsampled\":%s,\"snapshots\":{", n, m < n ? "true" : "false");
	static const char *const keys[] = {"t", "reason", "label", "mark", "rss", "pss", "heap", "mmap",
					   "mmap_file", "cgroup", "seq"};
	for (int k = 0; k < 11; k++) {
		sb_printf(j, "%s\"%s\":[", k ? "," : "", keys[k]);
		for (size_t q = 0; q < m; q++) {
			const struct snap *s = &f->snaps[idx[q]];
			if (q)
				sb_putc(j, ',');
			switch (k) {
			case 0: sb_printf(j, "%lld", (long long)s->elapsed_ms); break;
			case 1: sb_json_str(j, s->reason); break;
			case 2: if (s->label) sb_json_str(j, s->label); else sb_puts(j, "null"); break;
			case 3: sb_json_num(j, "%g", s->nmarks ? s->marks[0].value : NAN); break;
			case 4: num_or_null(j, s->rss_bytes, s->rss_bytes >= 0); break;
			case 5: num_or_null(j, s->pss_bytes, s->pss_bytes >= 0); break;
			case 6: num_or_null(j, s->tot[K_HEAP].live_bytes, s->tot[K_HEAP].present); break;
			case 7: num_or_null(j, s->tot[K_MMAP].live_bytes, s->tot[K_MMAP].present); break;
			case 8: num_or_null(j, s->tot[K_MMAP_FILE].live_bytes, s->tot[K_MMAP_FILE].present); break;
			case 9: num_or_null(j, s->cg_current, s->cg_current >= 0); break;
			case 10: sb_printf(j, "%lld", (long long)s->seq); break;
			}
		}
		sb_putc(j, ']');
	}
	sb_puts(j, ",\"dev\":{");
	int firstdev = 1;
	for (int d = 0; d < MAX_DEVS; d++) {
		int used = 0;
		for (size_t q = 0; q < m && !used; q++)
			used = f->snaps[idx[q]].dev_live[d] >= 0;
		if (!used)
			continue;
		sb_printf(j, "%s\"%d\":[", firstdev ? "" : ",", d);
		firstdev = 0;
		for (size_t q = 0; q < m; q++) {
			int64_t v = f->snaps[idx[q]].dev_live[d];
			if (q)
				sb_putc(j, ',');
			num_or_null(j, v, v >= 0);
		}
		sb_putc(j, ']');
	}
	sb_puts(j, "}}");
	struct leaks lk;
	answer_leaks(f, &o->ask, &lk);
	stack_json(j, f, &lk, idx, m);
	growth_start(j, f);
	moments_json(j, f, o, idx, m);
	free(idx);
	findings_json(j, f, o, &lk);
	leaks_free(&lk);
	/* the flame graph at the moment the page opens on (the peak, or the
	 * file's own FILE@N); it does not follow the snapshot control */
	struct fnode *root = flame_new();
	if (f->nsnaps) {
		const struct snap *s;
		int at_peak;
		size_t nv;
		struct site *v = answer_sites(f, &o->ask, &s, &at_peak, &nv);
		flame_add_sites(root, f, v, nv, "live", NULL, o->ask.kind);
		free(v);
	}
	struct sb svg = {0};
	char title[200];
	snprintf(title, sizeof title, "%s: live memory by call site %s", lab,
		 answer_moment_name(f, &o->ask));
	flame_svg(&svg, root, title, "live", 1100, 0);
	sb_puts(j, ",\"flame\":");
	sb_json_str(j, svg.p);
	sb_puts(j, ",\"flame_moment\":");
	sb_json_str(j, answer_moment_name(f, &o->ask));
	sb_free(&svg);
	flame_free(root);
	sb_putc(j, '}');
}

static void
dump_json(struct sb *j, struct mfile *f) {
	const struct oominfo *m = f->oom;
	char lab[128], a[16], b[16], name[512];
	if (!m)
		return;
	struct sb t = {0};
	sb_printf(&t, "%s: %s OOM, %s(%s) failed with %s at %.2f s", file_label(f, lab, sizeof lab),
		  m->kind, m->api, human_u64(m->requested, a), m->error, (double)m->elapsed_ms / 1000);
	sb_puts(j, "{\"title\":");
	sb_json_str(j, t.p);
	sb_free(&t);
	int64_t live = 0;
	for (size_t i = 0; i < f->nsegs; i++)
		if (!f->segs[i].mapped)
			live += (int64_t)f->segs[i].size;
	sb_printf(&t, "%zu segments, %s live", f->nsegs, human(live, a));
	if (m->drv_total > 0)
		sb_printf(&t, "; driver free %s of %s", human(m->drv_free, a), human(m->drv_total, b));
	if (f->nsegs > MAX_SEGS)
		sb_printf(&t, "; the %d largest segments shown", MAX_SEGS);
	sb_puts(j, ",\"what\":");
	sb_json_str(j, t.p);
	sb_free(&t);
	sb_puts(j, ",\"segments\":[");
	for (size_t i = 0, shown = 0; i < f->nsegs && shown < MAX_SEGS; i++, shown++) {
		const struct segment *s = &f->segs[i];
		sb_printf(j, "%s{\"addr\":\"0x%llx\",\"size\":%llu,\"dev\":%d,\"mapped\":%s,\"fn\":", i ? "," : "",
			  (unsigned long long)s->addr, (unsigned long long)s->size, s->device,
			  s->mapped ? "true" : "false");
		sb_json_str(j, site_func(f, s->stack, name, sizeof name));
		sb_putc(j, '}');
	}
	sb_puts(j, "],\"events\":[");
	size_t e0 = f->nevents > MAX_SEGS ? f->nevents - MAX_SEGS : 0;
	for (size_t i = e0; i < f->nevents; i++) {
		const struct event *e = &f->events[i];
		sb_printf(j, "%s{\"t\":%lld,\"op\":", i > e0 ? "," : "", (long long)e->time_ms);
		sb_json_str(j, e->op);
		sb_printf(j, ",\"size\":%llu}", (unsigned long long)e->size);
	}
	sb_puts(j, "]}");
}

/* ---- a multi-process run: one row per process, as `memtally ranks`
 * compares them (answer/ranks.h), the page opening on the first outlier,
 * else on the compared process that peaked highest ---- */
static void
summary_json(struct sb *j, struct run *r, struct opts *o) {
	struct ranks k;
	size_t m = answer_ranks(r, o->warmup, &k);
	char a[48];
	sb_puts(j, ",\"summary\":{\"window\":");
	if (m && k.per_step) {
		snprintf(a, sizeof a, "steps %.0f-%.0f", k.v[0].win.step_lo, k.v[0].win.step_hi);
		sb_json_str(j, a);
	} else {
		sb_json_str(j, "each process's run after start-up, before teardown (no step mark)");
	}
	sb_printf(j, ",\"compared\":%zu,\"skipped\":%zu,\"rows\":[", m, k.skipped);
	size_t open = 0;
	double most = -1;
	int outlier = 0;
	for (size_t i = 0; i < k.n; i++) {
		const struct rank_row *w = &k.v[i];
		char lab[128];
		if (w->compared && !outlier && (w->out || w->peak_heap + w->peak_mmap + w->peak_dev > most)) {
			open = w->file;
			most = w->peak_heap + w->peak_mmap + w->peak_dev;
			outlier = w->out;
		}
		sb_printf(j, "%s{\"p\":%zu,\"label\":", i ? "," : "", w->file);
		sb_json_str(j, file_label(w->f, lab, sizeof lab));
		sb_puts(j, ",\"argv\":");
		sb_json_str(j, w->f->argv);
		sb_printf(j, ",\"rank\":%lld,\"compared\":%s,\"heap\":%.0f,\"mmap\":%.0f,\"dev\":%.0f,"
			     "\"held\":%.0f,\"rss\":%.0f,\"growth\":",
			  (long long)w->f->rank, w->compared ? "true" : "false", w->peak_heap,
			  w->peak_mmap, w->peak_dev, w->final_host, fmax(w->peak_rss, 0));
		sb_json_str(j, w->compared ? rate_text(w->growth, k.per_step ? w->per_step : NAN,
						       (int64_t)w->window_ms, 1, a, sizeof a)
					   : "");
		sb_printf(j, ",\"out\":%s,\"why\":", w->out ? "true" : "false");
		sb_json_str(j, w->out ? w->why : "");
		sb_putc(j, '}');
	}
	sb_printf(j, "],\"open\":%zu}", open);
	ranks_free(&k);
}

int
cmd_html(struct opts *o) {
	struct run r, d;
	cmd_load(o, &r);
	run_load_dumps_if_any(&d, o->paths, o->npaths);
	cmd_native(o, &d);
	struct sb j = {0};
	sb_puts(&j, "{\"processes\":[");
	for (size_t i = 0; i < r.nfiles; i++) {
		if (i)
			sb_putc(&j, ',');
		process_json(&j, &r.files[i], o);
	}
	sb_puts(&j, "],\"dumps\":[");
	for (size_t i = 0; i < d.nfiles; i++) {
		if (i)
			sb_putc(&j, ',');
		dump_json(&j, &d.files[i]);
	}
	sb_puts(&j, "]");
	if (r.nfiles > 1)
		summary_json(&j, &r, o);
	sb_puts(&j, "}");
	struct sb page = {0};
	sb_puts(&page, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memtally report</title>"
		       "<style>");
	sb_puts(&page, html_css);
	sb_puts(&page, "</style></head><body>\n<h1>memtally report</h1>\n<pre id=\"errors\"></pre>\n"
		       "<div id=\"summary\"></div>\n"
		       "<h2 id=\"detail\">Process</h2><select id=\"proc\"></select>\n"
		       "<h2>Timeline</h2><div id=\"timeline\"></div>\n"
		       "<h2>Live memory by call site</h2><div class=\"note\">Stacked: the call sites "
		       "that held the most, the rest as other; leak suspects outlined in red. Hover "
		       "for the site and bytes, click for its stack.</div><div id=\"stacked\"></div>\n"
		       "<h2>Leak suspects and spikes</h2><div id=\"findings\"></div>\n"
		       "<h2>Flame graph</h2><div class=\"note\" id=\"flame-note\"></div><div id=\"flame\"></div>\n"
		       "<h2>Call sites</h2><div id=\"moment\"></div><div id=\"table\"></div>\n"
		       "<h2>OOM dumps</h2><div id=\"dumps\"></div>\n"
		       "<script id=\"mt-data\" type=\"application/json\">");
	/* Every '<' (only ever inside a JSON string) as \u003c: "</script>"
	 * would end the data, and "<!--<script>" anywhere swallowed the
	 * page's own script (HTML's script-data escape states). */
	for (size_t i = 0; i < j.len; i++) {
		if (j.p[i] == '<')
			sb_puts(&page, "\\u003c");
		else
			sb_putc(&page, j.p[i]);
	}
	sb_puts(&page, "</script>\n<script>\n");
	sb_puts(&page, flame_js);
	sb_puts(&page, "\n");
	sb_puts(&page, html_js);
	sb_puts(&page, "</script>\n");
	html_join(&page, &d); /* CUDA dumps with PyTorch's snapshot beside them */
	sb_puts(&page, "</body></html>\n");
	write_output(o->out, page.p, page.len);
	fprintf(stderr, "memtally: wrote %s\n", o->out);
	sb_free(&j);
	sb_free(&page);
	return 0;
}
