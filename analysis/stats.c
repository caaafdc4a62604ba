/* stats.c — robust statistics (stats.h). */
#include "stats.h"
#include "util.h"
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
	size_t end = n;
	while (end > lo + 1 && y[end - 1] < 0.8 * peak)
		end--;
	size_t p = end - 1;
	while (p > lo && y[p - 1] > y[p])
		p--;
	if (p < end - 1 && y[p] - y[end - 1] >= 0.05 * peak)
		end = p + 1;
	return end;
}
