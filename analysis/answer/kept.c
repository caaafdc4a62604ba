/* kept.c — "why is it still alive": the "kept" record (the Python hook's
 * search, scripts/python/_memtally/why.py) that explains a row: the chain
 * of references from a root to a live object one of the row's call sites
 * allocated (doc/FORMAT.md "kept"). */
#include "answer/answer.h"
#include "answer/sites.h"
#include "base/sb.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

const struct kept *
answer_kept(struct mfile *f, const struct ask *a, const struct row *r) {
	const struct kept *best = NULL;
	char buf[1100], want[1100];
	struct namer nm = {0};
	if (r->kind != K_HEAP || !f->nkept) /* the search maps heap blocks only */
		return NULL;
	/* a row is its sites' group name (answer_rows' key, before the
	 * largest site's label is added), or one site with --stacks */
	if (!a->apart)
		site_group_name(f, r->stack, want, sizeof want, &nm);
	for (size_t i = 0; i < f->nkept; i++) {
		const struct kept *k = &f->kept[i];
		if (!k->stack || k->stack >= f->nstacks)
			continue;
		/* the latest search's word (at exit) first, then the site
		 * holding the most */
		if (best && (best->final > k->final ||
			     (best->final == k->final && best->live_bytes > k->live_bytes)))
			continue;
		if (a->apart ? k->stack == r->stack
			     : !strcmp(site_group_name(f, k->stack, buf, sizeof buf, &nm), want))
			best = k;
	}
	namer_free(&nm);
	return best;
}

/* What the searches recorded say (from: the step the growth began at, or
 * NaN): the last that ran at a step, the first that ran since from and
 * how many did, the last cut at its budget and the last skipped since
 * from, whether one failed and whether one ran at exit. */
struct seen {
	const struct searched *last, *after, *cut, *skip;
	size_t nafter;
	int failed, atexit;
};
static void
seen_searches(const struct mfile *f, double from, struct seen *v) {
	*v = (struct seen){0};
	for (size_t i = 0; i < f->nsearched; i++) {
		const struct searched *s = &f->searched[i];
		v->failed |= !strcmp(s->skipped, "failed");
		if (s->final) {
			v->atexit |= !s->skipped[0];
			continue;
		}
		if (isnan(s->step))
			continue;
		if (!s->skipped[0])
			v->last = s;
		if (!isnan(from) && s->step < from)
			continue;
		if (s->skipped[0])
			v->skip = s;
		else if (s->cut[0])
			v->cut = s;
		else
			v->after = v->after ? v->after : s, v->nafter++;
	}
}
/* One step as text: "history (global list, train.py:20)" for a root,
 * "[37]" an item or key, "-> grad_fn NllLossBackward0" an attribute. */
static void
step_text(struct sb *b, const struct keptstep *s, int first) {
	if (first) {
		sb_printf(b, "%s (%s %s", s->name, s->how, s->type);
		if (s->where)
			sb_printf(b, ", %s", s->where);
		sb_putc(b, ')');
		return;
	}
	if (!strcmp(s->how, "item") || !strcmp(s->how, "key"))
		sb_printf(b, " [%s] %s", s->name, s->type);
	else if (!strcmp(s->how, "ref") && !s->name[0])
		sb_printf(b, " -> %s", s->type);
	else if (!strcmp(s->how, "attr"))
		sb_printf(b, " .%s %s", s->name, s->type);
	else /* cell, next, saved, ref: how and name */
		sb_printf(b, " -> %s %s %s", s->how, s->name, s->type);
}

void
kept_chain_text(struct sb *b, const struct kept *k) {
	for (size_t i = 0; i < k->nsteps; i++)
		step_text(b, &k->steps[i], i == 0);
}

void
kept_chain_json(struct sb *j, const struct kept *k) {
	sb_putc(j, '[');
	for (size_t i = 0; i < k->nsteps; i++) {
		const struct keptstep *s = &k->steps[i];
		sb_puts(j, i ? ",{\"how\":" : "{\"how\":");
		sb_json_str(j, s->how);
		sb_puts(j, ",\"name\":");
		sb_json_str(j, s->name);
		sb_puts(j, ",\"type\":");
		sb_json_str(j, s->type);
		if (s->where) {
			sb_puts(j, ",\"where\":");
			sb_json_str(j, s->where);
		}
		sb_putc(j, '}');
	}
	sb_putc(j, ']');
}

const char *
answer_unkept(const struct mfile *f, const struct leaks *l, const struct leak *t, char *text,
	      size_t n) {
	if (!f->python) /* not a Python process: no search to speak of */
		return NULL;
	if (t->r.kind != K_HEAP) {
		snprintf(text, n, "not searched: the search follows heap blocks only");
		return "not_heap";
	}
	int steps = 0;
	for (size_t i = 0; i < f->nsnaps && !steps; i++)
		steps = !isnan(snap_step(&f->snaps[i], "step"));
	/* the searches at steps; where the growth began (a step) */
	double from = l->mark && t->w0 < l->npts ? snap_step(l->pts[t->w0], l->mark) : NAN;
	struct seen v;
	seen_searches(f, from, &v);
	const struct searched *last = v.last, *after = v.after, *cut = v.cut, *skip = v.skip;
	size_t nafter = v.nafter;
	int failed = v.failed, atexit = v.atexit;
	if (!f->nsearched && !f->nkept) {
		if (!steps) {
			snprintf(text, n, "not searched: a process without steps (the search follows "
					  "growth from one optimizer step to the next)");
			return "no_steps";
		}
		snprintf(text, n, "not searched: no search recorded in this process (the Python hook "
				  "searches in PyTorch processes that `memtally run` starts)");
		return "not_searched";
	}
	if (!last && !after && !cut && !skip && !failed) {
		snprintf(text, n, "%s: a process without steps (the search follows growth from "
				  "one optimizer step to the next)",
			 atexit ? "searched at exit only" : "not searched");
		return "no_steps";
	}
	if (after) {
		if (!isnan(from))
			snprintf(text, n, "searched %zu time%s since the growth began at step %.0f "
					  "(first at step %.0f): no path from the program's names to "
					  "its memory",
				 nafter, nafter == 1 ? "" : "s", from, after->step);
		else
			snprintf(text, n, "searched %zu time%s at steps: no path from the program's "
					  "names to its memory", nafter, nafter == 1 ? "" : "s");
		return "no_path";
	}
	if (cut) {
		snprintf(text, n, "searched at step %.0f, after the growth began, but the search "
				  "stopped at its budget (%s) before it",
			 cut->step, !strcmp(cut->cut, "time") ? "a second" : "500,000 objects");
		return "cut";
	}
	if (failed) {
		snprintf(text, n, "not searched: the search failed and is off (see the warnings)");
		return "failed";
	}
	if (skip) {
		snprintf(text, n, "not searched since the growth began at step %.0f: the searches "
				  "had taken their share of the run (5%%)", isnan(from) ? skip->step : from);
		return "share";
	}
	if (last)
		snprintf(text, n, "not searched since the growth began at step %.0f: the last "
				  "search was at step %.0f", from, last->step);
	else
		snprintf(text, n, "not searched at a step since the growth began at step %.0f", from);
	return "late";
}
