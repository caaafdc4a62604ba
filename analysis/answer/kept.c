/* kept.c — "why is it still alive": the "kept" record (the Python hook's
 * search, scripts/python/_memtally/why.py) that explains a row: the chain
 * of references from a root to a live object one of the row's call sites
 * allocated (doc/FORMAT.md "kept"). */
#include "answer/answer.h"
#include "answer/sites.h"
#include "base/sb.h"
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
