/* window.c — where growth is measured (answer.h): after start-up and
 * before teardown, counted in steps when the run marks them.  leaks, top,
 * ranks and the HTML page all take this one window. */
#include "answer/answer.h"
#include "answer/stats.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

double
snap_step(const struct snap *s, const char *mark) {
	for (int k = 0; mark && k < s->nmarks; k++)
		if (!strcmp(s->marks[k].name, mark))
			return s->marks[k].value;
	return NAN;
}

/* A mark that counts steps: "step" when the run has it, else the last
 * snapshot's first mark; only a counter (a value that never falls). */
static const char *
step_mark(const struct mfile *f) {
	const struct snap *last = &f->snaps[f->nsnaps - 1];
	const char *mk = NULL;
	for (size_t i = 0; i < f->nsnaps && !mk; i++)
		if (!isnan(snap_step(&f->snaps[i], "step")))
			mk = "step";
	if (!mk && last->nmarks)
		mk = last->marks[0].name;
	double prev = -INFINITY;
	for (size_t i = 0; mk && i < f->nsnaps; i++) {
		double v = snap_step(&f->snaps[i], mk);
		if (isnan(v))
			continue;
		if (v < prev)
			return NULL;
		prev = v;
	}
	return mk;
}

/* Snapshots that are teardown by their reason: the exit snapshot is
 * written after the program's own exit path (an interpreter's frees). */
static int
is_exit(const struct snap *s) {
	return !strcmp(s->reason, "exit");
}

/* The last snapshot that describes a step: the last one of reason "step"
 * (written by the marking thread, of the state at the mark); without any,
 * the first at the last step value.  A death after it, at a later step,
 * ends the window instead.  Exit snapshots are never in it. */
static size_t
steps_end(const struct mfile *f, const char *mk, double vn) {
	size_t end = 0, first_vn = 0;
	for (size_t i = 0; i < f->nsnaps; i++) {
		const struct snap *s = &f->snaps[i];
		double v = snap_step(s, mk);
		if (isnan(v) || is_exit(s))
			continue;
		if (!strcmp(s->reason, "step"))
			end = i + 1;
		if (v == vn && !first_vn)
			first_vn = i + 1;
	}
	if (!end)
		end = first_vn;
	for (size_t i = end; i < f->nsnaps; i++)
		if (snap_killed(&f->snaps[i]) && snap_step(&f->snaps[i], mk) >
						     snap_step(&f->snaps[end - 1], mk))
			end = i + 1;
	return end;
}

/* On steps: from the warm-up fraction of the steps (snapshots before the
 * first step are start-up) to the last snapshot that describes a step
 * (steps_end: what follows is teardown, or work after the loop).  0 when
 * the run has fewer than two steps. */
static int
by_steps(const struct mfile *f, const char *mk, double warmup, struct window *w) {
	double v0 = NAN, vn = NAN;
	for (size_t i = 0; i < f->nsnaps; i++) {
		double v = snap_step(&f->snaps[i], mk);
		if (isnan(v) || is_exit(&f->snaps[i]))
			continue;
		if (isnan(v0))
			v0 = v;
		vn = v;
	}
	if (isnan(v0) || !(vn > v0))
		return 0;
	size_t end = steps_end(f, mk, vn);
	if (!end)
		return 0;
	vn = snap_step(&f->snaps[end - 1], mk);
	if (!(vn > v0))
		return 0;
	double from = v0 + warmup * (vn - v0);
	size_t lo = 0;
	while (lo < f->nsnaps && !(snap_step(&f->snaps[lo], mk) >= from))
		lo++;
	w->lo = lo;
	w->end = end;
	w->by_step = 1;
	return 1;
}

void
answer_window(const struct mfile *f, double warmup, struct window *w) {
	memset(w, 0, sizeof *w);
	if (!f->nsnaps)
		return;
	w->mark = step_mark(f);
	if (!w->mark || !by_steps(f, w->mark, warmup, w)) {
		int64_t t0 = f->snaps[0].elapsed_ms, t1 = f->snaps[f->nsnaps - 1].elapsed_ms;
		double from = (double)t0 + warmup * (double)(t1 - t0);
		size_t lo = 0;
		while (lo < f->nsnaps && (double)f->snaps[lo].elapsed_ms < from)
			lo++;
		/* Teardown: what a process frees on its way out (an
		 * interpreter's exit) would hide every leak: a fall that runs
		 * to the end.  A spike before it is part of the run. */
		size_t end = lo;
		if (lo < f->nsnaps) {
			double *y = xmalloc(f->nsnaps * sizeof *y);
			for (size_t i = 0; i < f->nsnaps; i++)
				y[i] = (double)(f->snaps[i].tot[K_HEAP].live_bytes +
						f->snaps[i].tot[K_MMAP].live_bytes);
			end = teardown_end(y, lo, f->nsnaps);
			free(y);
		}
		w->lo = lo;
		w->end = end;
	}
	if (w->end < w->lo)
		w->end = w->lo;
	w->warm = w->lo;
	w->tear = f->nsnaps - w->end;
	if (w->end > w->lo) {
		w->step_lo = snap_step(&f->snaps[w->lo], w->mark);
		w->step_hi = snap_step(&f->snaps[w->end - 1], w->mark);
	} else {
		w->step_lo = w->step_hi = NAN;
	}
}

int
answer_window_steps(const struct mfile *f, const struct window *w, double from, double to,
		    struct window *out) {
	*out = *w;
	if (!w->mark)
		return w->end > w->lo;
	/* the snapshots that cover [from, to]: from the last at or before
	 * `from` to the first at or after `to` (a rank whose snapshots are
	 * sparse still spans the steps the others are measured on) */
	size_t lo = w->lo, end;
	for (size_t i = w->lo; i < w->end; i++)
		if (snap_step(&f->snaps[i], w->mark) <= from)
			lo = i;
	for (end = lo; end < w->end; end++)
		if (snap_step(&f->snaps[end], w->mark) >= to) {
			end++;
			break;
		}
	out->lo = lo;
	out->end = end;
	out->warm = lo;
	out->tear = f->nsnaps - end;
	out->step_lo = end > lo ? snap_step(&f->snaps[lo], w->mark) : NAN;
	out->step_hi = end > lo ? snap_step(&f->snaps[end - 1], w->mark) : NAN;
	return end > lo;
}
