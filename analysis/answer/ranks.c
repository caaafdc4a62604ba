/* ranks.c — the ranks side by side (answer/ranks.h): peaks, what each
 * held at its window's end, growth on one window for all, outliers. */
#include "answer/ranks.h"
#include "answer/procs.h"
#include "answer/stats.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
cmp_rank(const void *x, const void *y) {
	const struct rank_row *a = x, *b = y;
	if (a->compared != b->compared)
		return a->compared ? -1 : 1;
	if (a->compared && a->f->rank != b->f->rank)
		return a->f->rank < b->f->rank ? -1 : 1;
	if (a->compared && a->f->pid != b->f->pid)
		return a->f->pid < b->f->pid ? -1 : 1;
	return a->file < b->file ? -1 : a->file > b->file; /* the others keep their order */
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
peaks(struct rank_row *k) {
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
growth(struct rank_row *k) {
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

/* One window for all compared: each rank's own, cut to the steps all of
 * them have when every one marks steps; the others keep their own. */
static void
windows(struct rank_row *v, size_t n, size_t m, double warmup) {
	double from = -INFINITY, to = INFINITY;
	int all_steps = 1;
	for (size_t i = 0; i < n; i++) {
		answer_window(v[i].f, warmup, &v[i].win);
		if (i >= m)
			continue;
		all_steps &= v[i].win.by_step;
		if (v[i].win.by_step) {
			from = fmax(from, v[i].win.step_lo);
			to = fmin(to, v[i].win.step_hi);
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct window w;
		if (i < m && all_steps && to > from &&
		    answer_window_steps(v[i].f, &v[i].win, from, to, &w))
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
judge(struct rank_row *v, size_t m) {
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
		struct rank_row *k = &v[i];
		k->z = fmax(fabs(k->zf), fmax(fabs(k->zg), fabs(k->zr)));
		k->out = m >= 2 && k->z > 3.5;
		k->why = fabs(k->zg) > 3.5 ? "growth" : fabs(k->zf) > 3.5 ? "final live" : "peak rss";
	}
	free(fin), free(gro), free(rss), free(z);
}

size_t
answer_ranks(struct run *r, double warmup, struct ranks *out) {
	memset(out, 0, sizeof *out);
	size_t n = r->nfiles, m = 0, ranked = 0, nc = 0;
	struct rank_row *v = xcalloc(n + 1, sizeof *v);
	for (size_t i = 0; i < n; i++)
		ranked += r->files[i].rank >= 0;
	/* without ranks, the processes that matter are compared, not the
	 * helpers (DataLoader workers, pool workers: answer/procs.c) */
	int *role = xcalloc(n + 1, sizeof *role);
	if (!ranked) {
		struct proc_facts *pf = xcalloc(n + 1, sizeof *pf);
		for (size_t i = 0; i < n; i++)
			proc_facts(&r->files[i], &pf[i]);
		procs_classify(pf, n, role);
		free(pf);
	}
	for (size_t i = 0; i < n; i++) {
		struct mfile *f = &r->files[i];
		int helper = !ranked && role[i] != ROLE_MAIN;
		out->skipped += (ranked && f->rank < 0) || helper; /* launchers, helpers */
		if (!f->nsnaps)
			continue;
		struct rank_row *k = &v[m++];
		k->f = f;
		k->file = i;
		k->compared = ranked ? f->rank >= 0 : !helper;
		nc += k->compared;
		k->per_step = NAN;
		k->why = "";
		const struct snap *last = &f->snaps[f->nsnaps - 1];
		k->final_host = (double)(last->tot[K_HEAP].live_bytes + last->tot[K_MMAP].live_bytes);
		peaks(k);
	}
	free(role);
	xqsort(v, m, sizeof *v, cmp_rank);
	out->v = v;
	out->n = m;
	out->ncompared = nc;
	if (!nc)
		return 0;
	windows(v, m, nc, warmup);
	judge(v, nc);
	out->per_step = 1;
	for (size_t i = 0; i < nc; i++) {
		out->per_step &= !isnan(v[i].per_step);
		out->outliers += v[i].out;
	}
	return nc;
}

void
ranks_free(struct ranks *k) {
	free(k->v);
	memset(k, 0, sizeof *k);
}
