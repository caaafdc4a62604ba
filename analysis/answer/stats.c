/* stats.c — robust statistics (stats.h). */
#include "answer/stats.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXPTS 80

static size_t
pick(const double *x, const double *y, size_t n, double *px, double *py) {
	if (n <= MAXPTS) {
		memcpy(px, x, n * sizeof *x);
		memcpy(py, y, n * sizeof *y);
		return n;
	}
	for (size_t i = 0; i < MAXPTS; i++) {
		size_t k = i * (n - 1) / (MAXPTS - 1);
		px[i] = x[k];
		py[i] = y[k];
	}
	return MAXPTS;
}

double
theil_sen(const double *x, const double *y, size_t n) {
	double px[MAXPTS], py[MAXPTS];
	n = pick(x, y, n, px, py);
	double *s = xmalloc(n * n / 2 * sizeof *s + sizeof *s);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (px[j] != px[i])
				s[k++] = (py[j] - py[i]) / (px[j] - px[i]);
	double m = median(s, k);
	free(s);
	return m;
}

static int cmp_double(const void *a, const void *b);

double
theil_sen_low(const double *x, const double *y, size_t n, double z) {
	double px[MAXPTS], py[MAXPTS];
	n = pick(x, y, n, px, py);
	if (n < 3)
		return -INFINITY;
	double *s = xmalloc(n * n / 2 * sizeof *s + sizeof *s);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (px[j] != px[i])
				s[k++] = (py[j] - py[i]) / (px[j] - px[i]);
	/* Sen (1968): the slopes' rank (k - C) / 2, C = z sd(Kendall's S) */
	double c = z * sqrt((double)n * (n - 1) * (2.0 * n + 5) / 18), r = ((double)k - c) / 2;
	double lo = -INFINITY;
	if (k && r >= 0) {
		xqsort(s, k, sizeof *s, cmp_double);
		lo = s[(size_t)r < k ? (size_t)r : k - 1];
	}
	free(s);
	return lo;
}

double
kendall_tau(const double *x, const double *y, size_t n) {
	double px[MAXPTS], py[MAXPTS];
	n = pick(x, y, n, px, py);
	long conc = 0, disc = 0, tx = 0, ty = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			double dx = px[j] - px[i], dy = py[j] - py[i];
			if (dx == 0 && dy == 0)
				continue;
			if (dx == 0)
				tx++;
			else if (dy == 0)
				ty++;
			else if ((dx > 0) == (dy > 0))
				conc++;
			else
				disc++;
		}
	double d = sqrt((double)(conc + disc + tx) * (double)(conc + disc + ty));
	return d > 0 ? (double)(conc - disc) / d : 0;
}

void
robust_z(const double *x, size_t n, double *z) {
	double *t = xmalloc((n + 1) * sizeof *t);
	memcpy(t, x, n * sizeof *t);
	double med = median(t, n);
	for (size_t i = 0; i < n; i++)
		t[i] = fabs(x[i] - med);
	double mad = median(t, n);
	for (size_t i = 0; i < n; i++) {
		if (mad > 0)
			z[i] = (x[i] - med) / (1.4826 * mad);
		else if (fabs(x[i] - med) > 0.1 * fabs(med) && fabs(x[i] - med) > 0)
			z[i] = x[i] > med ? 1e9 : -1e9;
		else
			z[i] = 0;
	}
	free(t);
}

size_t
teardown_end(const double *y, size_t lo, size_t n) {
	if (n <= lo + 1)
		return n;
	double peak = y[lo];
	for (size_t i = lo; i < n; i++)
		peak = y[i] > peak ? y[i] : peak;
	/* Only a fall that runs to the end (a level at its bottom included)
	 * is teardown: a spike earlier (an
	 * evaluation buffer, a checkpoint) is followed by more of the run,
	 * and cutting at it hid every leak after it. */
	size_t p = n - 1; /* back over a level at the bottom, then the fall */
	while (p > lo && y[p - 1] == y[p])
		p--;
	while (p > lo && y[p - 1] > y[p])
		p--;
	if (p < n - 1 && y[p] - y[n - 1] >= 0.05 * peak)
		return p + 1;
	return n;
}

int
leak_fit(const double *x, const double *y, size_t npts, double min_growth,
	 struct leak_fit *fit) {
	double lo = y[0], hi = y[0];
	for (size_t k = 1; k < npts; k++)
		lo = y[k] < lo ? y[k] : lo, hi = y[k] > hi ? y[k] : hi;
	if (npts < 3 || hi - lo < min_growth)
		return 0; /* cannot have grown enough anywhere */
	/* The whole window, its second half and its last quarter: a leak that
	 * starts late (after a long start-up such as `import torch`) is
	 * measured on the part where it grows, so its rate is not diluted by
	 * the flat part. */
	struct leak_fit best = {.tau = -1};
	size_t starts[3] = {0, npts / 2, npts * 3 / 4};
	for (int w = 0; w < 3; w++) {
		size_t w0 = starts[w], n = npts - w0;
		if (n < (w ? 6u : 3u))
			break;
		const double *xs = x + w0, *ys = y + w0;
		double sl = theil_sen(xs, ys, n);
		double gr = sl * (xs[n - 1] - xs[0]);
		if (sl <= 0 || gr < min_growth)
			continue;
		double tau = kendall_tau(xs, ys, n);
		if (tau < 0.6 || tau <= best.tau + 0.02)
			continue;
		/* a leak rises again and again; one step up (a cache filled
		 * once, an arena taken during start-up) is not */
		size_t ups = 0;
		for (size_t k = 1; k < n; k++)
			ups += ys[k] > ys[k - 1];
		if (ups < 3 || 3 * ups < n - 1)
			continue;
		if (n >= 6) { /* still growing in the window's second half? */
			size_t h = n / 2;
			if (theil_sen(xs + h, ys + h, n - h) < 0.3 * sl)
				continue;
		}
		best = (struct leak_fit){.slope = sl, .tau = tau, .growth = gr, .w0 = w0};
	}
	if (best.tau < 0)
		return 0;
	*fit = best;
	return 1;
}

static int
cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double
median(double *v, size_t n) {
	if (!n)
		return 0;
	xqsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
