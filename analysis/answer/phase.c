/* phase.c — the program's phases (the snapshots' "phase", "phases" and
 * each kind's "peak_phase"): which phase a moment fell in, and its name
 * as the views print it ("during checkpoint save at step 300"). */
#include "answer/answer.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *
phase_name(const struct mfile *f, int ix, char *buf, size_t n) {
	if (ix <= 0 || ix > f->nphase_names || !n)
		return NULL;
	snprintf(buf, n, "%s", f->phase_names[ix - 1]);
	for (char *p = buf; *p; p++)
		if (*p == '_')
			*p = ' ';
	return buf;
}

/* The innermost (shortest) span holding ms, a span's end not counted:
 * one phase ending and the next beginning share a millisecond, and a
 * moment stamped in it (a spike made as the second began) is the second
 * one's.  Only where no span holds it that way does an end count (a span
 * shorter than a millisecond, a moment at its very end). */
int
answer_phase_at(const struct mfile *f, int64_t ms, double *step) {
	int best = 0;
	if (step)
		*step = NAN;
	if (ms < 0)
		return 0;
	for (int closed = 0; closed < 2 && !best; closed++) {
		int64_t len = INT64_MAX;
		for (size_t i = 0; i < f->nspans; i++) {
			const struct phasespan *s = &f->spans[i];
			if (s->b_ms <= ms && (ms < s->e_ms || (closed && ms == s->e_ms)) &&
			    s->e_ms - s->b_ms <= len) {
				best = s->name, len = s->e_ms - s->b_ms;
				if (step)
					*step = s->step;
			}
		}
	}
	return best;
}

const char *
phase_during(const struct mfile *f, int ix, double step, char *buf, size_t n) {
	char name[64];
	if (!phase_name(f, ix, name, sizeof name)) {
		if (n)
			buf[0] = 0;
		return buf;
	}
	if (!isnan(step))
		snprintf(buf, n, "during %s at step %.0f", name, step);
	else
		snprintf(buf, n, "during %s", name);
	return buf;
}
