/* ranks.h — the ranks (or processes) of a run side by side, computed once
 * for `memtally ranks` and the HTML page's per-process summary: the exact
 * peaks the shim keeps per kind (heap, mmap, device), live host bytes at
 * the window's end (before teardown), peak RSS, and growth on one window
 * for all: the growth window of answer.h (after start-up, before
 * teardown), cut to the steps every rank has when the run marks steps, so
 * no rank is measured over its import and another over its training.  A
 * rank whose growth, final live bytes or peak RSS has a robust z-score
 * (median and MAD over all ranks) beyond 3.5 is an outlier.  With two
 * ranks there is no spread to measure: one is named when it grows 4 times
 * as fast as the other and by 64 KiB a step (64 MiB an hour without steps)
 * more, or ends holding twice as much and 64 MiB more.
 *
 * Which processes are compared: the ranked ones when any process has a
 * rank (a launcher and its helpers are not), else all; every process with
 * a snapshot gets its figures either way (compared = 0 for the others). */
#ifndef MTA_ANSWER_RANKS_H
#define MTA_ANSWER_RANKS_H
#include "answer/answer.h"

struct rank_row {
	struct mfile *f;
	size_t file;             /* its index in the run's files */
	int compared;            /* judged with the others (a rank, or no ranks at all) */
	struct window win;       /* the window growth is measured on */
	double peak_heap, peak_mmap, peak_dev, final_host, peak_rss;
	double growth;           /* bytes an hour on the window */
	double per_step;         /* bytes a step on it; NAN: no steps */
	double window_ms, steps; /* the window's length */
	double z, zf, zg, zr;    /* robust z-scores: the largest, final, growth, RSS */
	int out;                 /* an outlier */
	const char *why;         /* "growth", "final live" or "peak rss" */
};

struct ranks {
	struct rank_row *v;      /* compared rows first (by rank, then pid), then the rest */
	size_t n, ncompared;
	size_t skipped;          /* processes without a rank when others have one
				  * (launchers), with a snapshot or not: not compared */
	int per_step;            /* every compared row has growth per step */
	size_t outliers;
};

/* The processes of r that have a snapshot (rows point into r), growth on
 * windows with warm-up fraction warmup; returns the number compared (0:
 * no process has a snapshot). */
size_t answer_ranks(struct run *r, double warmup, struct ranks *out);
void ranks_free(struct ranks *k);

#endif
