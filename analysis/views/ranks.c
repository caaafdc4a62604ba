/* ranks.c — `memtally ranks`: the ranks (or processes) side by side: the
 * exact peaks the shim keeps per kind (heap, mmap, device), final live
 * host bytes (at the window's end: before teardown), peak RSS, and growth on one window for all: the growth
 * window of answer.h (after start-up, before teardown), cut to the steps
 * every rank has when the run marks steps, so no rank is measured over its
 * import and another over its training.  A rank whose growth, final live
 * bytes or peak RSS has a robust z-score (median and MAD over all ranks)
 * beyond 3.5 is named.  With two ranks there is no spread to measure: one
 * is named when it grows 4 times as fast as the other and by 64 KiB a step
 * (64 MiB an hour without steps) more, or ends holding twice as much and
 * 64 MiB more.  From 256 ranks the table is a summary (min, median, max of
 * each column) with the outliers' rows first; --all prints every row. */
#include "cmd/cmd.h"
#include "answer/answer.h"
#include "answer/stats.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SUMMARY_FROM 256

struct rk {
	const struct mfile *f;
	struct window win;       /* the window growth is measured on */
	double peak_heap, peak_mmap, peak_dev, final_host, peak_rss;
	double growth;           /* bytes an hour on the window */
	double per_step;         /* bytes a step on it; NAN: no steps */
	double window_ms, steps; /* the window's length */
	double z, zf, zg, zr;
	int out;
	const char *why;
};

static int
cmp_rank(const void *x, const void *y) {
	const struct rk *a = x, *b = y;
	if (a->f->rank != b->f->rank)
		return a->f->rank < b->f->rank ? -1 : 1;
	return a->f->pid < b->f->pid ? -1 : a->f->pid > b->f->pid;
}

static double
live_all(const struct snap *s) {
	double t = 0;
	for (int k = 0; k < NKINDS; k++)
		t += (double)s->tot[k].live_bytes;
	return t;
}

/* Peaks: the shim's per-kind high-water marks (exact), else the most any
 * snapshot saw. */
static void
peaks(struct rk *k) {
	const struct mfile *f = k->f;
	const struct snap *last = &f->snaps[f->nsnaps - 1];
	for (size_t s = 0; s < f->nsnaps; s++) {
		const struct snap *sn = &f->snaps[s];
		k->peak_heap = fmax(k->peak_heap, (double)sn->tot[K_HEAP].live_bytes);
		k->peak_mmap = fmax(k->peak_mmap, (double)sn->tot[K_MMAP].live_bytes);
		k->peak_dev = fmax(k->peak_dev, (double)(sn->tot[K_CUDA].live_bytes +
							 sn->tot[K_CUDA_MANAGED].live_bytes +
							 sn->tot[K_CUDA_VMM].live_bytes));
		k->peak_rss = fmax(k->peak_rss, (double)sn->rss_bytes);
	}
	k->peak_heap = fmax(k->peak_heap, (double)last->tot[K_HEAP].peak_bytes);
	k->peak_mmap = fmax(k->peak_mmap, (double)last->tot[K_MMAP].peak_bytes);
	k->peak_dev = fmax(k->peak_dev, (double)(last->tot[K_CUDA].peak_bytes +
						 last->tot[K_CUDA_MANAGED].peak_bytes +
						 last->tot[K_CUDA_VMM].peak_bytes));
}

/* Growth of every tracked kind over the window [lo, end). */
static void
growth(struct rk *k) {
	const struct mfile *f = k->f;
	size_t lo = k->win.lo, n = k->win.end - k->win.lo;
	k->growth = 0;
	k->per_step = NAN;
	k->window_ms = k->steps = 0;
	if (n < 3)
		return;
	double *x = xmalloc(n * sizeof *x), *y = xmalloc(n * sizeof *y), *st = xmalloc(n * sizeof *st);
	int marked = k->win.mark != NULL;
	for (size_t i = 0; i < n; i++) {
		const struct snap *s = &f->snaps[lo + i];
		x[i] = (double)s->elapsed_ms / 3.6e6;
		y[i] = live_all(s);
		st[i] = snap_step(s, k->win.mark);
		marked &= !isnan(st[i]);
	}
	k->growth = theil_sen(x, y, n);
	k->window_ms = (x[n - 1] - x[0]) * 3.6e6;
	if (marked && st[n - 1] > st[0]) {
		k->per_step = theil_sen(st, y, n);
		k->steps = st[n - 1] - st[0];
	}
	free(x), free(y), free(st);
}

/* One window for all: each rank's own, cut to the steps all of them have
 * when every rank marks steps. */
static void
windows(struct rk *v, size_t m, double warmup) {
	double from = -INFINITY, to = INFINITY;
	int all_steps = 1;
	for (size_t i = 0; i < m; i++) {
		answer_window(v[i].f, warmup, &v[i].win);
		all_steps &= v[i].win.by_step;
		if (v[i].win.by_step) {
			from = fmax(from, v[i].win.step_lo);
			to = fmin(to, v[i].win.step_hi);
		}
	}
	for (size_t i = 0; i < m; i++) {
		struct window w;
		if (all_steps && to > from && answer_window_steps(v[i].f, &v[i].win, from, to, &w))
			v[i].win = w;
		growth(&v[i]);
		/* what it held at the window's end, before any teardown */
		if (v[i].win.end > v[i].win.lo) {
			const struct snap *e = &v[i].f->snaps[v[i].win.end - 1];
			v[i].final_host = (double)(e->tot[K_HEAP].live_bytes + e->tot[K_MMAP].live_bytes);
		}
	}
}

static void
judge(struct rk *v, size_t m) {
	double *fin = xmalloc(m * sizeof *fin), *gro = xmalloc(m * sizeof *gro),
	       *rss = xmalloc(m * sizeof *rss), *z = xmalloc(3 * m * sizeof *z);
	int steps = 1;
	for (size_t i = 0; i < m; i++)
		steps &= !isnan(v[i].per_step);
	for (size_t i = 0; i < m; i++) {
		fin[i] = v[i].final_host;
		gro[i] = steps ? v[i].per_step : v[i].growth;
		rss[i] = v[i].peak_rss;
	}
	robust_z(fin, m, z);
	robust_z(gro, m, z + m);
	robust_z(rss, m, z + 2 * m);
	for (size_t i = 0; i < m; i++)
		v[i].zf = z[i], v[i].zg = z[m + i], v[i].zr = z[2 * m + i];
	if (m == 2) {
		double min_g = steps ? 64 << 10 : 64.0 * (1 << 20);
		for (int i = 0; i < 2; i++) {
			double g = gro[i], go = gro[1 - i], f = fin[i], fo = fin[1 - i];
			v[i].zg = g > 4 * fmax(go, 0) && g - go > min_g ? 1e9 : 0;
			v[i].zf = f > 2 * fo && f - fo > 64.0 * (1 << 20) ? 1e9 : 0;
			v[i].zr = 0;
		}
	}
	for (size_t i = 0; i < m; i++) {
		struct rk *k = &v[i];
		k->z = fmax(fabs(k->zf), fmax(fabs(k->zg), fabs(k->zr)));
		k->out = m >= 2 && k->z > 3.5;
		k->why = fabs(k->zg) > 3.5 ? "growth" : fabs(k->zf) > 3.5 ? "final live" : "peak rss";
	}
	free(fin), free(gro), free(rss), free(z);
}

static const char *
growth_text(const struct rk *k, int per_step, char *buf, size_t n) {
	return rate_text(k->growth, per_step ? k->per_step : NAN, (int64_t)k->window_ms, 1, buf, n);
}

static void
row_text(const struct rk *k, int per_step) {
	char a[16], b[16], c[16], d[16], e[16], lab[128], gt[48];
	printf("%-22s %10s %10s %10s %10s %10s %18s  %s%s\n", file_label(k->f, lab, sizeof lab),
	       human((int64_t)k->peak_heap, a), human((int64_t)k->peak_mmap, b),
	       human((int64_t)k->final_host, c), human((int64_t)k->peak_dev, d),
	       human((int64_t)k->peak_rss, e), growth_text(k, per_step, gt, sizeof gt),
	       k->out ? "<< outlier: " : "", k->out ? k->why : "");
}

static int
cmp_dbl(const void *x, const void *y) {
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

/* min, median, max of each column over all ranks */
static void
summary_text(const struct rk *v, size_t m) {
	double *c = xmalloc(m * sizeof *c);
	const char *names[] = {"min", "median", "max"};
	for (int q = 0; q < 3; q++) {
		char cells[6][16];
		for (int col = 0; col < 6; col++) {
			for (size_t i = 0; i < m; i++) {
				const struct rk *k = &v[i];
				double x[6] = {k->peak_heap, k->peak_mmap, k->final_host, k->peak_dev,
					       k->peak_rss, k->growth};
				c[i] = x[col];
			}
			xqsort(c, m, sizeof *c, cmp_dbl);
			double x = q == 0 ? c[0] : q == 1 ? c[m / 2] : c[m - 1];
			if (col == 5) {
				char t[48];
				snprintf(cells[col], sizeof cells[col], "%s", rate_text(x, NAN, 3600000, 1, t, sizeof t));
			} else {
				human((int64_t)x, cells[col]);
			}
		}
		printf("%-22s %10s %10s %10s %10s %10s %18s\n", names[q], cells[0], cells[1], cells[2],
		       cells[3], cells[4], cells[5]);
	}
	free(c);
}

static void
ranks_json(const struct rk *v, size_t m) {
	struct sb j = {0};
	sb_puts(&j, "{\"ranks\":[");
	for (size_t i = 0; i < m; i++) {
		const struct rk *k = &v[i];
		if (i)
			sb_putc(&j, ',');
		sb_printf(&j, "{\"rank\":%lld,\"pid\":%lld,\"host\":", (long long)k->f->rank,
			  (long long)k->f->pid);
		sb_json_str(&j, k->f->host);
		sb_puts(&j, ",\"file\":");
		sb_json_str(&j, k->f->path);
		sb_printf(&j, ",\"peak_heap_bytes\":%.0f,\"peak_mmap_bytes\":%.0f,\"held_host_bytes\":%.0f,"
			      "\"peak_device_bytes\":%.0f,\"peak_rss_bytes\":%.0f,"
			      "\"growth_bytes_per_hour\":%.0f,\"growth_window_ms\":%.0f,"
			      "\"growth_bytes_per_step\":",
			  k->peak_heap, k->peak_mmap, k->final_host, k->peak_dev, k->peak_rss, k->growth,
			  k->window_ms);
		sb_json_num(&j, "%.0f", k->per_step);
		sb_puts(&j, ",\"window_steps\":");
		sb_json_num(&j, "%.0f", isnan(k->per_step) ? NAN : k->win.step_lo);
		sb_puts(&j, ",\"window_steps_to\":");
		sb_json_num(&j, "%.0f", isnan(k->per_step) ? NAN : k->win.step_hi);
		sb_printf(&j, ",\"z_final\":%.2f,\"z_growth\":%.2f,\"z_rss\":%.2f,\"outlier\":%s}",
			  fmax(fmin(k->zf, 1e6), -1e6), fmax(fmin(k->zg, 1e6), -1e6),
			  fmax(fmin(k->zr, 1e6), -1e6), k->out ? "true" : "false");
	}
	sb_puts(&j, "],\"outliers\":[");
	int first = 1;
	for (size_t i = 0; i < m; i++)
		if (v[i].out) {
			sb_printf(&j, "%s%lld", first ? "" : ",", (long long)v[i].f->rank);
			first = 0;
		}
	sb_puts(&j, "]}\n");
	fputs(j.p, stdout);
	sb_free(&j);
}

static void
ranks_text(const struct rk *v, size_t m, size_t skipped, int all) {
	int per_step = 1, outliers = 0;
	for (size_t i = 0; i < m; i++) {
		per_step &= !isnan(v[i].per_step);
		outliers += v[i].out;
	}
	if (m && per_step)
		printf("growth on steps %.0f-%.0f (the steps every rank has, after warm-up)\n",
		       v[0].win.step_lo, v[0].win.step_hi);
	else if (m)
		printf("growth on each rank's run after start-up, before teardown (no step mark)\n");
	printf("%-22s %10s %10s %10s %10s %10s %18s\n", "rank", "peak heap", "peak mmap",
	       "held", "peak dev", "peak rss", "growth");
	if (m >= SUMMARY_FROM && !all) {
		for (size_t i = 0; i < m; i++)
			if (v[i].out)
				row_text(&v[i], per_step);
		summary_text(v, m);
		printf("(%zu ranks: outliers, then min, median and max of each column; --all for every "
		       "rank)\n", m);
	} else {
		for (size_t i = 0; i < m; i++)
			row_text(&v[i], per_step);
	}
	if (!outliers)
		printf("no rank stands out%s\n", m < 2 ? " (one rank: no comparison)" : "");
	if (skipped)
		printf("(%zu process%s without a rank, e.g. the launcher, not compared)\n", skipped,
		       skipped == 1 ? "" : "es");
}

int
cmd_ranks(struct opts *o) {
	struct run r;
	cmd_load(o, &r);
	size_t n = r.nfiles, m = 0, ranked = 0, skipped = 0;
	struct rk *v = xcalloc(n + 1, sizeof *v);
	for (size_t i = 0; i < n; i++)
		ranked += r.files[i].rank >= 0;
	for (size_t i = 0; i < n; i++) {
		const struct mfile *f = &r.files[i];
		if (!f->nsnaps || (ranked && f->rank < 0)) { /* launchers, helpers */
			skipped += ranked && f->rank < 0;
			continue;
		}
		struct rk *k = &v[m++];
		k->f = f;
		const struct snap *last = &f->snaps[f->nsnaps - 1];
		k->final_host = (double)(last->tot[K_HEAP].live_bytes + last->tot[K_MMAP].live_bytes);
		peaks(k);
	}
	if (!m)
		die(EXIT_BAD_INPUT, "ranks: no process has a snapshot");
	xqsort(v, m, sizeof *v, cmp_rank);
	windows(v, m, o->warmup);
	judge(v, m);
	if (o->json)
		ranks_json(v, m);
	else
		ranks_text(v, m, skipped, o->all);
	free(v);
	return 0;
}
