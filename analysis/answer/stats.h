/* stats.h — robust statistics for growth: Theil-Sen slope, Kendall's tau,
 * and the median/MAD z-score. */
#ifndef MTA_STATS_H
#define MTA_STATS_H
#include <stddef.h>

/* Median of pairwise slopes (y_j - y_i)/(x_j - x_i) over pairs with
 * distinct x; at most 80 evenly spaced points are used. */
double theil_sen(const double *x, const double *y, size_t n);
/* The lower end of theil_sen's confidence interval (Sen 1968), z
 * standard deviations of Kendall's S below the median slope (2.58: 99%
 * two-sided); -INFINITY with fewer than 3 points. */
double theil_sen_low(const double *x, const double *y, size_t n, double z);
/* Kendall's tau-b between x and y (1: y always rises with x). */
double kendall_tau(const double *x, const double *y, size_t n);
/* Robust z-scores (x - median) / (1.4826 * MAD) into z; when MAD is 0,
 * values away from the median by more than 10% of it get +-1e9. */
void robust_z(const double *x, size_t n, double *z);
/* Where a run's teardown starts, for live totals y[lo..n): a trailing run
 * of falling points (or level ones after them), to the last, that lost at least 5% of the
 * peak (an interpreter freeing what the program held on its way out: the
 * first thing it frees may be exactly the leak, while the total is still
 * high).  A fall followed by anything else is part of the run (a spike is
 * neither a leak nor a teardown).  Returns the end (exclusive), at least
 * lo + 1. */
size_t teardown_end(const double *y, size_t lo, size_t n);

/* One call site's growth, judged on a window of its live bytes y over
 * times x (npts points, x in hours).  Three windows are tried: the whole,
 * its second half and its last quarter (the halves need 6 points); in each
 * a suspect has a Theil-Sen slope > 0, fitted growth >= min_growth, tau >=
 * 0.6, rises between at least a third of consecutive points and at least
 * 3 times (one step up is a cache filling once, not a leak), and, with 6
 * points or more, a slope over the window's second half >= 30% of the
 * whole window's (still growing).  The window with the highest tau wins,
 * the longest when another is within 0.02.  Returns 1 and fills *fit for
 * a suspect, else 0. */
struct leak_fit {
	double slope;  /* bytes per unit of x over the winning window */
	double tau;    /* Kendall's tau there */
	double growth; /* slope x the window's span */
	size_t w0;     /* where the window starts */
};
int leak_fit(const double *x, const double *y, size_t npts, double min_growth,
	     struct leak_fit *fit);

/* Robust statistics on doubles (the array is reordered). */
double median(double *v, size_t n);

#endif
