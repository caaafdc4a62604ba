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

int
answer_phase_at(const struct mfile *f, int64_t ms, double *step) {
	int best = 0;
	int64_t len = INT64_MAX;
	if (step)
		*step = NAN;
	if (ms < 0)
		return 0;
	for (size_t i = 0; i < f->nspans; i++) {
		const struct phasespan *s = &f->spans[i];
		if (s->b_ms <= ms && ms <= s->e_ms && s->e_ms - s->b_ms <= len) {
			best = s->name, len = s->e_ms - s->b_ms;
			if (step)
				*step = s->step;
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
