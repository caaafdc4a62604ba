/* html_timeline.c — the time series of `memtally html`'s page, per
 * process (html_int.h): which snapshots the timelines show (at most
 * MAX_SNAPS, evenly spaced, the first, last and peak kept), the totals at
 * each of them (RSS, PSS, heap, mmap, file mappings, cgroup usage, CUDA
 * per device) with their reasons, labels and step marks, and where growth
 * starts (a flat part, then a rising line). */
#include "export/html_int.h"
#include "answer/stats.h"
#include <stdlib.h>
#include <math.h>
#include <string.h>

#define MAX_SNAPS 1000

static void
num_or_null(struct sb *j, int64_t v, int present) {
	if (present)
		sb_i64(j, (long long)v);
	else
		sb_puts(j, "null");
}

size_t
html_kept_snaps(const struct mfile *f, size_t *idx) {
	size_t n = f->nsnaps, m = 0;
	const struct snap *pk = file_peak(f, -1);
	for (size_t i = 0; i < n; i++) {
		int keep = n <= MAX_SNAPS || i == 0 || i == n - 1 || &f->snaps[i] == pk ||
			   (i * (MAX_SNAPS - 3) / n != (i + 1) * (MAX_SNAPS - 3) / n);
		if (keep)
			idx[m++] = i;
	}
	return m;
}

/* "dev":{"N":[live bytes of device N at each kept snapshot]}, the devices
 * used in any of them */
static void
dev_json(struct sb *j, const struct mfile *f, const size_t *idx, size_t m) {
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
	sb_putc(j, '}');
}

void
html_series_json(struct sb *j, const struct mfile *f, const size_t *idx, size_t m) {
	size_t n = f->nsnaps;
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
			case 0: sb_i64(j, (long long)s->elapsed_ms); break;
			case 1: sb_json_str(j, s->reason); break;
			case 2: if (s->label) sb_json_str(j, s->label); else sb_puts(j, "null"); break;
			case 3: sb_json_num(j, "%g", s->nmarks ? s->marks[0].value : NAN); break;
			case 4: num_or_null(j, s->rss_bytes, s->rss_bytes >= 0); break;
			case 5: num_or_null(j, s->pss_bytes, s->pss_bytes >= 0); break;
			case 6: num_or_null(j, s->tot[K_HEAP].live_bytes, s->tot[K_HEAP].present); break;
			case 7: num_or_null(j, s->tot[K_MMAP].live_bytes, s->tot[K_MMAP].present); break;
			case 8: num_or_null(j, s->tot[K_MMAP_FILE].live_bytes, s->tot[K_MMAP_FILE].present); break;
			case 9: num_or_null(j, s->cg_current, s->cg_current >= 0); break;
			case 10: sb_i64(j, (long long)s->seq); break;
			}
		}
		sb_putc(j, ']');
	}
	dev_json(j, f, idx, m);
	sb_putc(j, '}');
}

/* "Growth starts at step N": the split of live heap + mmap bytes (a running
 * median of 5) over the snapshots into a flat part and a rising straight
 * line that fits best (least squares over every split), reported when the
 * line rises by more than 10% of where it starts, at the first mark value
 * of the rising part. */

/* The series fitted: x the elapsed ms, y live heap + mmap bytes as a
 * running median of 5 (a checkpoint's transient mapping in one snapshot
 * must not bend the line). */
static void
growth_series(const struct mfile *f, double *x, double *y) {
	size_t n = f->nsnaps;
	for (size_t i = 0; i < n; i++) {
		double w[5];
		size_t m = 0;
		for (size_t q = i >= 2 ? i - 2 : 0; q <= i + 2 && q < n; q++)
			w[m++] = (double)(f->snaps[q].tot[K_HEAP].live_bytes +
					  f->snaps[q].tot[K_MMAP].live_bytes);
		y[i] = median(w, m);
		x[i] = (double)f->snaps[i].elapsed_ms;
	}
}

/* The best split: the rising line from snapshot k on, y = icpt + slope * x */
struct split {
	size_t k;
	double slope, icpt;
};

/* The sums over values centred on (x0, y0) and scaled by (xs, ys): the
 * flat part's prefix sums (py, pyy: up to i) and the line's suffix sums
 * (from i on), n + 1 of each. */
struct sums {
	double x0, y0, xs, ys;
	double *py, *pyy, *sx, *sy, *sxx, *sxy, *syy;
};

static void
sums_fill(struct sums *u, const double *x, const double *y, size_t n) {
	double x0 = 0, y0 = 0, xs = 1, ys = 1, xlo = x[0], xhi = x[0], ylo = y[0], yhi = y[0];
	for (size_t i = 0; i < n; i++) {
		x0 += x[i] / (double)n, y0 += y[i] / (double)n;
		xlo = fmin(xlo, x[i]), xhi = fmax(xhi, x[i]), ylo = fmin(ylo, y[i]), yhi = fmax(yhi, y[i]);
	}
	if (xhi > xlo)
		xs = xhi - xlo;
	if (yhi > ylo)
		ys = yhi - ylo;
	u->x0 = x0, u->y0 = y0, u->xs = xs, u->ys = ys;
	u->py[0] = u->pyy[0] = 0;
	for (size_t i = 0; i < n; i++) {
		double yc = (y[i] - y0) / ys;
		u->py[i + 1] = u->py[i] + yc;
		u->pyy[i + 1] = u->pyy[i] + yc * yc;
	}
	u->sx[n] = u->sy[n] = u->sxx[n] = u->sxy[n] = u->syy[n] = 0;
	for (size_t i = n; i-- > 0;) {
		double xc = (x[i] - x0) / xs, yc = (y[i] - y0) / ys;
		u->sx[i] = u->sx[i + 1] + xc;
		u->sy[i] = u->sy[i + 1] + yc;
		u->sxx[i] = u->sxx[i + 1] + xc * xc;
		u->sxy[i] = u->sxy[i + 1] + xc * yc;
		u->syy[i] = u->syy[i + 1] + yc * yc;
	}
}

/* Every split k: flat mean before, least-squares line from k on; the
 * split with the least squared error wins.  Prefix and suffix sums make
 * it linear (it was quadratic: 18 s for 100 k snapshots), on values
 * centred first so the sums of squares keep their precision. */
static struct split
best_split(const double *x, const double *y, size_t n) {
	struct sums u;
	u.py = xmalloc((n + 1) * sizeof *u.py), u.pyy = xmalloc((n + 1) * sizeof *u.pyy);
	u.sx = xmalloc((n + 1) * sizeof *u.sx), u.sy = xmalloc((n + 1) * sizeof *u.sy);
	u.sxx = xmalloc((n + 1) * sizeof *u.sxx), u.sxy = xmalloc((n + 1) * sizeof *u.sxy);
	u.syy = xmalloc((n + 1) * sizeof *u.syy);
	sums_fill(&u, x, y, n);
	double best = -1;
	struct split b = {0, 0, 0};
	for (size_t k = 0; k + 3 <= n; k++) {
		double sse = k ? u.pyy[k] - u.py[k] * u.py[k] / (double)k : 0;
		double c = (double)(n - k);
		double den = c * u.sxx[k] - u.sx[k] * u.sx[k];
		double sl = den > 0 ? (c * u.sxy[k] - u.sx[k] * u.sy[k]) / den : 0;
		double a = (u.sy[k] - sl * u.sx[k]) / c;
		sse += u.syy[k] - 2 * a * u.sy[k] - 2 * sl * u.sxy[k] + c * a * a + 2 * a * sl * u.sx[k] +
		       sl * sl * u.sxx[k];
		if (best < 0 || sse < best)
			best = sse, b.k = k, b.slope = sl, b.icpt = a;
	}
	/* back from centred, scaled values: y = icpt + slope * x */
	b.slope = b.slope * u.ys / u.xs;
	b.icpt = b.icpt * u.ys + u.y0 - b.slope * u.x0;
	free(u.py), free(u.pyy), free(u.sx), free(u.sy), free(u.sxx), free(u.sxy), free(u.syy);
	return b;
}

/* The sentence and the step: the first value of the last snapshot's first
 * mark from snapshot k on. */
static void
growth_mark(struct sb *j, const struct mfile *f, size_t k0, double from, double to) {
	size_t n = f->nsnaps;
	const char *name = f->snaps[n - 1].marks[0].name;
	for (size_t i = k0; i < n; i++)
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

void
html_growth_start(struct sb *j, const struct mfile *f) {
	size_t n = f->nsnaps;
	if (n < 6 || !f->snaps[n - 1].nmarks)
		return;
	double *y = xmalloc(n * sizeof *y), *x = xmalloc(n * sizeof *x);
	growth_series(f, x, y);
	struct split b = best_split(x, y, n);
	double from = b.icpt + b.slope * x[b.k], to = b.icpt + b.slope * x[n - 1];
	free(x);
	free(y);
	if (b.slope <= 0 || to <= from * 1.1 || from < 0)
		return;
	growth_mark(j, f, b.k, from, to);
}

/* ,"phases":[[name, begin_ms, end_ms, step], ...]: the program's phases
 * (the snapshots' "phases") on the timeline: every span of a phase that
 * has at most 100 (a checkpoint, an evaluation), and of the others (a
 * batch, a backward pass each step) those of a 500th of the run and up,
 * the bar raised until at most 400 of theirs are left. */
void
html_phases_json(struct sb *j, const struct mfile *f) {
	if (!f->nspans || !f->nsnaps)
		return;
	size_t per[MAX_PHASES + 1] = {0};
	for (size_t i = 0; i < f->nspans; i++)
		per[f->spans[i].name]++;
	int64_t run = f->snaps[f->nsnaps - 1].elapsed_ms, min = run / 500;
	for (;;) {
		size_t n = 0;
		for (size_t i = 0; i < f->nspans; i++)
			n += per[f->spans[i].name] > 100 && f->spans[i].e_ms - f->spans[i].b_ms >= min;
		if (n <= 400)
			break;
		min = min * 2 + 1;
	}
	char nm[64];
	sb_puts(j, ",\"phases\":[");
	int first = 1;
	for (size_t i = 0; i < f->nspans; i++) {
		const struct phasespan *p = &f->spans[i];
		if (per[p->name] > 100 && p->e_ms - p->b_ms < min)
			continue;
		sb_puts(j, first ? "[" : ",[");
		first = 0;
		sb_json_str(j, phase_name(f, p->name, nm, sizeof nm));
		sb_printf(j, ",%lld,%lld,", (long long)p->b_ms, (long long)p->e_ms);
		sb_json_num(j, "%.0f", p->step);
		sb_putc(j, ']');
	}
	sb_putc(j, ']');
}
