/* growth.c — what grows (answer.h), the computation `leaks`, `top` and
 * the HTML page print.
 *
 * Method: on the growth window (window.c), up to 80 evenly spaced
 * snapshots.  Call sites are summed into rows as report names them (a
 * Python line's native variants are one row), and each row's live bytes
 * over time get a Theil-Sen slope (the median of pairwise slopes: robust
 * to a few odd snapshots) and Kendall's tau (how consistently it rises):
 * leak_fit (stats.h) says whether it is a suspect, on the whole window,
 * its second half or its last quarter, so a leak that starts after a long
 * start-up is judged where it grows.  Suspects are ranked by bytes per
 * hour; with a step mark, growth per step too. */
#include "answer/answer.h"
#include "answer/sites.h"
#include "answer/stats.h"
#include "base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_GROWTH (64 << 10)
#define FRAG_Z 2.58     /* fragmentation: the 99% interval's low end */
#define FRAG_SHARE 0.5  /* ... grows by half the heap's growth or more */

/* A row's live bytes at each point. */
struct ser {
	struct row r;
	double y[LEAK_MAXPTS];
};

/* Rows by key (kind, name), and each stack's row index per kind. */
struct series {
	struct ser *v;
	size_t n, cap;
	struct keyix ix;
	uint32_t *of;       /* (stack * NKINDS + kind) -> index + 1 */
	struct namer nm;
};

static struct ser *
series_of(struct mfile *f, const struct ask *a, struct series *m, const struct site *s) {
	size_t slot = (size_t)s->stack * NKINDS + s->kind;
	if (s->stack < f->nstacks && m->of[slot])
		return &m->v[m->of[slot] - 1];
	char name[1024], key[1100];
	if (a->apart)
		site_name(f, s->stack, 2, name, sizeof name);
	else
		site_group_name(f, s->stack, name, sizeof name, &m->nm);
	int klen = snprintf(key, sizeof key, "%c%s%c%u", s->kind + 1, name, 1,
			    a->apart ? s->stack : 0);
	if (klen >= (int)sizeof key)
		klen = (int)sizeof key - 1;
	int fresh = 1;
	uint64_t *ix = keyix_slot(&m->ix, key, (size_t)klen, &fresh);
	if (fresh) {
		m->v = xgrow(m->v, m->n + 1, &m->cap, sizeof *m->v);
		struct ser *t = &m->v[m->n];
		memset(t, 0, sizeof *t);
		t->r.name = site_label(f, xstrdup(name), s->stack);
		t->r.kind = s->kind;
		t->r.stack = s->stack;
		*ix = ++m->n;
	}
	m->v[*ix - 1].r.nsites++; /* a stack (and kind) new to the row */
	if (s->stack < f->nstacks)
		m->of[slot] = (uint32_t)*ix;
	return &m->v[*ix - 1];
}

static int
cmp_leak(const void *a, const void *b) {
	const struct leak *x = a, *y = b;
	if (x->per_hour != y->per_hour)
		return x->per_hour < y->per_hour ? 1 : -1;
	return strcmp(x->r.name, y->r.name);
}

/* The window's points: up to LEAK_MAXPTS snapshots evenly spaced. */
static void
pick_points(struct mfile *f, struct leaks *l) {
	size_t cnt = l->win.end - l->win.lo;
	for (size_t i = 0; i < cnt && l->npts < LEAK_MAXPTS; i++) {
		size_t k = cnt <= LEAK_MAXPTS ? i : i * (cnt - 1) / (LEAK_MAXPTS - 1);
		l->pts[l->npts++] = &f->snaps[l->win.lo + k];
	}
}

/* The process over the top suspect's window: the suspects' growth beside
 * the tracked total's, the heap's, the allocator's footprint and RSS
 * (Theil-Sen), to tell how much of the process's growth they explain. */
static void
process_rates(const struct ask *a, struct leaks *l, const double *x) {
	l->rss_h = l->tracked_h = l->foot_h = l->heap_h = NAN;
	l->sus_h = 0;
	if (!l->n)
		return;
	size_t w0 = l->v[0].w0, n = l->npts - w0;
	double yr[LEAK_MAXPTS], yt[LEAK_MAXPTS], yf[LEAK_MAXPTS], yh[LEAK_MAXPTS], yg[LEAK_MAXPTS];
	int have_rss = 1, have_foot = 1;
	for (size_t i = 0; i < n; i++) {
		const struct snap *p = l->pts[w0 + i];
		yr[i] = (double)p->rss_bytes;
		have_rss &= p->rss_bytes >= 0;
		yf[i] = (double)p->alloc_footprint;
		have_foot &= p->alloc_footprint >= 0;
		yt[i] = 0;
		yh[i] = (double)p->tot[K_HEAP].live_bytes;
		yg[i] = yf[i] - yh[i];
		for (int k = 0; k < NKINDS; k++)
			if (a->kind < 0 || a->kind == k)
				yt[i] += (double)p->tot[k].live_bytes;
	}
	if (have_rss)
		l->rss_h = theil_sen(x + w0, yr, n);
	l->tracked_h = theil_sen(x + w0, yt, n);
	l->heap_h = theil_sen(x + w0, yh, n);
	l->frag = 0;
	if (have_foot) {
		l->foot_h = theil_sen(x + w0, yf, n);
		/* fragmentation: the footprint's part not live (footprint -
		 * heap) grows at least half as fast as the heap, at the low
		 * end of its slope's 99% interval: a verdict with a margin,
		 * so noise near the line does not flip it */
		l->frag = l->heap_h > 0 &&
			  theil_sen_low(x + w0, yg, n, FRAG_Z) > FRAG_SHARE * l->heap_h;
	}
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].w0 == w0)
			l->sus_h += l->v[i].per_hour;
	l->win_ms = l->pts[l->npts - 1]->elapsed_ms - l->pts[w0]->elapsed_ms;
}

/* Whether row y (points [w0, n)) follows the workload: least squares of
 * y on a workload number w and the progress x (steps where the process
 * marks them, else time), y ~ c + b w + g x, for each number every point
 * has and whose term the fit tells apart from the progress's (b at least
 * 10 standard errors: a workload that only rises with time cannot tell
 * growth from a leak).  It follows when the fit explains it (R^2 of at least
 * 0.9, b > 0) and what the time term adds over the window (g x span) is
 * under MIN_GROWTH and a tenth of its growth: a leak on top of a growing
 * workload keeps its time term.  The best R^2 wins (tokens among fits
 * within 0.005). */
static int
follows(const struct leaks *l, const double *x, const double *y, size_t w0, double growth,
	struct workfit *out) {
	memset(out, 0, sizeof *out);
	/* the step snapshots (of the state at the step's mark, which its
	 * workload describes) when there are 6, else every point */
	size_t ix[LEAK_MAXPTS], n = 0;
	for (size_t i = w0; i < l->npts; i++)
		if (!strcmp(l->pts[i]->reason, "step"))
			ix[n++] = i;
	if (n < 6)
		for (size_t i = n = 0; i + w0 < l->npts; i++)
			ix[n++] = w0 + i;
	if (n < 6)
		return 0;
	const struct snap *p0 = l->pts[ix[0]];
	double xs[LEAK_MAXPTS], ys[LEAK_MAXPTS];
	for (size_t i = 0; i < n; i++)
		xs[i] = x[ix[i]], ys[i] = y[ix[i]];
	x = xs, y = ys, w0 = 0;
	for (int k = 0; k < p0->work.n; k++) {
		const char *name = p0->work.v[k].name;
		double w[LEAK_MAXPTS];
		size_t i;
		for (i = 0; i < n; i++) {
			const struct workload *wl = &l->pts[ix[i]]->work;
			int j = 0;
			while (j < wl->n && strcmp(wl->v[j].name, name))
				j++;
			if (j == wl->n)
				break;
			w[i] = wl->v[j].value;
		}
		if (i < n)
			continue;
		double mw = 0, mx = 0, my = 0;
		for (i = 0; i < n; i++)
			mw += w[i], mx += x[w0 + i], my += y[w0 + i];
		mw /= (double)n, mx /= (double)n, my /= (double)n;
		double sww = 0, sxx = 0, swx = 0, swy = 0, sxy = 0, syy = 0;
		for (i = 0; i < n; i++) {
			double dw = w[i] - mw, dx = x[w0 + i] - mx, dy = y[w0 + i] - my;
			sww += dw * dw, sxx += dx * dx, swx += dw * dx;
			swy += dw * dy, sxy += dx * dy, syy += dy * dy;
		}
		double det = sww * sxx - swx * swx;
		if (sww <= 0 || sxx <= 0 || syy <= 0 || det <= 1e-9 * sww * sxx)
			continue;
		double b = (swy * sxx - sxy * swx) / det, g = (sxy * sww - swy * swx) / det;
		double r2 = (b * swy + g * sxy) / syy;
		double beyond = g * (x[n - 1] - x[0]);
		if (b <= 0 || r2 < 0.9 || beyond >= MIN_GROWTH || beyond >= 0.1 * growth)
			continue;
		/* the workload's term is told apart from the progress's: b at
		 * least 10 standard errors (a workload that rises with time
		 * alone leaves b to the noise; an exact fit has none) */
		double sse = syy * (1 - r2), vb = sse / (double)(n - 3) * sxx / det;
		if (sse > 0 && b * b < 100 * vb)
			continue;
		if (out->on && (r2 < out->r2 - 0.005 ||
				(r2 <= out->r2 + 0.005 && strcmp(name, "tokens"))))
			continue; /* the better fit, and tokens among equals */
		/* the fit printed: on the workload alone (the time term is nil) */
		double b1 = swy / sww;
		*out = (struct workfit){name, b1, my - b1 * mw, r2, beyond};
	}
	return out->on != NULL;
}

void
answer_leaks(struct mfile *f, const struct ask *a, struct leaks *l) {
	memset(l, 0, sizeof *l);
	answer_window(f, a->warmup, &l->win);
	pick_points(f, l);
	if (l->npts < 3)
		return;
	double x[LEAK_MAXPTS], steps[LEAK_MAXPTS];
	int marked = l->win.mark != NULL;
	for (size_t i = 0; i < l->npts; i++) {
		x[i] = (double)l->pts[i]->elapsed_ms / 3.6e6; /* hours */
		steps[i] = snap_step(l->pts[i], l->win.mark);
		marked &= !isnan(steps[i]);
	}
	l->mark = marked && steps[l->npts - 1] > steps[0] ? l->win.mark : NULL;
	struct series m = {0};
	m.of = xcalloc(f->nstacks * NKINDS + 1, sizeof *m.of);
	for (size_t i = 0; i < l->npts; i++) {
		size_t nv;
		const struct site *v = snap_sites_view(f, l->pts[i], &nv); /* not copied */
		for (size_t k = 0; k < nv; k++) {
			if (a->kind >= 0 && v[k].kind != a->kind)
				continue;
			struct ser *t = series_of(f, a, &m, &v[k]);
			t->y[i] += (double)v[k].live_bytes;
			/* the row shows the stack of its site that holds most at
			 * the end (its frames: the native cause under a line) */
			if (i == l->npts - 1 && v[k].live_bytes > t->r.top) {
				t->r.top = v[k].live_bytes;
				t->r.stack = v[k].stack;
			}
		}
	}
	l->examined = m.n;
	double total_growth = 0; /* all growth over the window, for shares */
	for (size_t i = 0; i < m.n; i++)
		if (m.v[i].y[l->npts - 1] > m.v[i].y[0])
			total_growth += m.v[i].y[l->npts - 1] - m.v[i].y[0];
	size_t cap = 0, fcap = 0;
	for (size_t i = 0; i < m.n; i++) {
		struct ser *s = &m.v[i];
		struct leak_fit fit;
		if (!leak_fit(x, s->y, l->npts, MIN_GROWTH, &fit)) {
			free(s->r.name);
			continue;
		}
		size_t w0 = fit.w0, n = l->npts - w0;
		struct workfit wf;
		struct leak *t;
		/* against steps where the process marks them: its wall time
		 * stretches with the machine's load (a CI run's checkpoint
		 * took a second where it takes a tenth), its steps do not */
		if (follows(l, l->mark ? steps : x, s->y, w0, fit.growth, &wf)) {
			l->follow = xgrow(l->follow, l->nfollow + 1, &fcap, sizeof *l->follow);
			t = &l->follow[l->nfollow++];
		} else {
			l->v = xgrow(l->v, l->n + 1, &cap, sizeof *l->v);
			t = &l->v[l->n++];
		}
		*t = (struct leak){
			.r = s->r, .per_hour = fit.slope, .tau = fit.tau, .growth = fit.growth,
			.share = total_growth > 0 ? fmin(1, fit.growth / total_growth) : 0,
			.per_step = l->mark ? theil_sen(steps + w0, s->y + w0, n) : NAN,
			.from_ms = l->pts[w0]->elapsed_ms, .w0 = w0};
		t->wf = wf; /* zero unless it follows */
		t->r.live = t->r.live_now = (int64_t)s->y[l->npts - 1];
	}
	free(m.v);
	free(m.of);
	keyix_free(&m.ix);
	namer_free(&m.nm);
	if (l->n)
		xqsort(l->v, l->n, sizeof *l->v, cmp_leak);
	if (l->nfollow)
		xqsort(l->follow, l->nfollow, sizeof *l->follow, cmp_leak);
	process_rates(a, l, x);
}

void
leaks_free(struct leaks *l) {
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].r.name);
	free(l->v);
	l->v = NULL;
	l->n = 0;
	for (size_t i = 0; i < l->nfollow; i++)
		free(l->follow[i].r.name);
	free(l->follow);
	l->follow = NULL;
	l->nfollow = 0;
}
