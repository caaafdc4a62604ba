/* diff.c — `memtally diff A B`: the change per row between two moments.
 * A and B are files, FILE@N / FILE@peak (that snapshot), or run
 * directories, whose processes are paired by rank, else by command line
 * in the order they started.  Rows are answer.h's (one per name and kind,
 * as report prints them), matched by name, so two runs of the same
 * program compare although ASLR moved every address.  The moment is the
 * peak unless asked (--snapshot, FILE@N). */
#include "cmd/cmd.h"
#include "answer/answer.h"
#include "answer/sites.h"
#include "base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct drow {
	const char *name;
	int kind, nsites;
	const struct mfile *fa, *fb;
	uint32_t sa, sb;
	int64_t live_a, live_b, count_a, count_b, allocs_a, allocs_b;
};

static int
cmp_change(const void *x, const void *y) {
	const struct drow *a = x, *b = y;
	int64_t da = llabs(a->live_b - a->live_a), db = llabs(b->live_b - b->live_a);
	if (da != db)
		return da < db ? 1 : -1;
	if (a->kind != b->kind)
		return a->kind - b->kind;
	return strcmp(a->name, b->name);
}

/* Both sides' rows, matched by kind and name. */
static struct drow *
match(struct row *ra, size_t na, struct row *rb, size_t nb, const struct mfile *fa,
      const struct mfile *fb, size_t *nr) {
	struct drow *d = xcalloc(na + nb + 1, sizeof *d);
	struct keyix ix = {0};
	size_t n = 0;
	for (int side = 0; side < 2; side++) {
		struct row *r = side ? rb : ra;
		size_t m = side ? nb : na;
		for (size_t i = 0; i < m; i++) {
			int fresh = 1;
			uint64_t *slot = row_slot(&ix, &r[i], &fresh);
			struct drow *w = fresh ? &d[n] : &d[*slot - 1];
			if (fresh) {
				w->name = r[i].name;
				w->kind = r[i].kind;
				*slot = ++n;
			}
			if (side) {
				w->fb = fb, w->sb = r[i].stack, w->live_b = r[i].live;
				w->count_b = r[i].count, w->allocs_b = r[i].allocs;
			} else {
				w->fa = fa, w->sa = r[i].stack, w->live_a = r[i].live;
				w->count_a = r[i].count, w->allocs_a = r[i].allocs;
			}
			if (r[i].nsites > w->nsites)
				w->nsites = r[i].nsites;
		}
	}
	keyix_free(&ix);
	if (n)
		xqsort(d, n, sizeof *d, cmp_change);
	*nr = n;
	return d;
}

/* The moment a side compares, in words: at the peak, when it was (the
 * snapshot nearest it by live bytes: its time and step), not the snapshot
 * that carries the figures; else that snapshot. */
static void
moment_text(struct mfile *f, const struct snap *s, int at_peak, int kind, char *buf, size_t n) {
	if (!at_peak) {
		snprintf(buf, n, "seq %lld, %s, %.2f s", (long long)s->seq, s->reason,
			 (double)s->elapsed_ms / 1000);
		return;
	}
	const struct snap *p = file_peak(f, kind);
	double step = p ? snap_step(p, "step") : NAN;
	if (!p)
		snprintf(buf, n, "when each kind was at its high-water mark");
	else if (!isnan(step))
		snprintf(buf, n, "near step %.0f, %.2f s", step, (double)p->elapsed_ms / 1000);
	else
		snprintf(buf, n, "near %.2f s", (double)p->elapsed_ms / 1000);
}

static void
pair_head(struct mfile *fa, const struct snap *a, struct mfile *fb, const struct snap *b,
	  struct opts *o, struct sb *j, int first, int64_t ta, int64_t tb, int pa, int pb) {
	char la[128], lb[128], x[16], y[16], z[16], ma[96], mb[96];
	if (o->json) {
		if (!first)
			sb_putc(j, ',');
		sb_puts(j, "{\"a\":{\"file\":");
		sb_json_str(j, fa->path);
		sb_printf(j, ",\"seq\":%lld,\"moment\":", (long long)a->seq);
		sb_json_str(j, answer_moment_name(fa, &o->ask));
		moment_text(fa, a, pa, o->kind, ma, sizeof ma);
		sb_puts(j, ",\"when\":");
		sb_json_str(j, ma);
		sb_puts(j, "},\"b\":{\"file\":");
		sb_json_str(j, fb->path);
		sb_printf(j, ",\"seq\":%lld,\"moment\":", (long long)b->seq);
		sb_json_str(j, answer_moment_name(fb, &o->ask));
		moment_text(fb, b, pb, o->kind, mb, sizeof mb);
		sb_puts(j, ",\"when\":");
		sb_json_str(j, mb);
		sb_printf(j, "},\"live_bytes_a\":%lld,\"live_bytes_b\":%lld,\"callsites\":[",
			  (long long)ta, (long long)tb);
		return;
	}
	moment_text(fa, a, pa, o->kind, ma, sizeof ma);
	moment_text(fb, b, pb, o->kind, mb, sizeof mb);
	printf("== A: %s %s (%s)\n", file_label(fa, la, sizeof la), answer_moment_name(fa, &o->ask),
	       ma);
	printf("   B: %s %s (%s)\n", file_label(fb, lb, sizeof lb), answer_moment_name(fb, &o->ask),
	       mb);
	printf("  live: %s -> %s (%s)\n", human(ta, x), human(tb, y), human(tb - ta, z));
	printf("  %11s %11s %11s %9s %-9s %s\n", "change", "A live", "B live", "B count", "kind",
	       "where");
}

/* A row; counts at the peak are not known (the shim keeps bytes at the
 * peak, not counts): absent (JSON) or "-" (text), never 0 beside bytes. */
static void
drow_print(const struct drow *r, struct opts *o, struct sb *j, int shown, int pa, int pb) {
	char x[16], y[16], z[16], name[1100], cb[24];
	const struct mfile *f = r->fb ? r->fb : r->fa;
	uint32_t st = r->fb ? r->sb : r->sa;
	if (o->json) {
		if (shown)
			sb_putc(j, ',');
		sb_printf(j, "{\"kind\":\"%s\",\"change_bytes\":%lld,\"live_bytes_a\":%lld,"
			     "\"live_bytes_b\":%lld,",
			  kind_names[r->kind], (long long)(r->live_b - r->live_a), (long long)r->live_a,
			  (long long)r->live_b);
		if (!pa)
			sb_printf(j, "\"live_count_a\":%lld,", (long long)r->count_a);
		if (!pb)
			sb_printf(j, "\"live_count_b\":%lld,", (long long)r->count_b);
		sb_printf(j, "\"allocs_a\":%lld,\"allocs_b\":%lld,\"sites\":%d,\"new\":%s,\"gone\":%s,",
			  (long long)r->allocs_a, (long long)r->allocs_b, r->nsites,
			  r->fa ? "false" : "true", r->fb ? "false" : "true");
		site_json_names(j, f, st);
		sb_putc(j, '}');
		return;
	}
	site_row_name(&(struct site_row){.name = (char *)r->name, .nsites = r->nsites}, 58,
		      o->stacks, name, sizeof name);
	snprintf(cb, sizeof cb, pb ? "-" : "%lld", (long long)r->count_b);
	printf("  %11s %11s %11s %9s %-9s %s%s\n", human(r->live_b - r->live_a, x),
	       human(r->live_a, y), human(r->live_b, z), cb, kind_names[r->kind],
	       name, !r->fa ? " [new]" : !r->fb ? " [gone]" : "");
	if (o->stacks)
		site_print_stack(stdout, f, st, "        ");
}

static void
compare(struct mfile *fa, struct mfile *fb, struct opts *o, struct sb *j, int first) {
	const struct snap *a, *b;
	int pa, pb;
	size_t na, nb, nr;
	struct row *ra = answer_rows_at(fa, &o->ask, &a, &pa, &na);
	struct row *rb = answer_rows_at(fb, &o->ask, &b, &pb, &nb);
	struct drow *rows = match(ra, na, rb, nb, fa, fb, &nr);
	int64_t ta = 0, tb = 0;
	for (size_t i = 0; i < nr; i++)
		ta += rows[i].live_a, tb += rows[i].live_b;
	pair_head(fa, a, fb, b, o, j, first, ta, tb, pa, pb);
	int shown = 0;
	int64_t sa = 0, sb = 0; /* the rows shown: the rest is "other" */
	for (size_t i = 0; i < nr && shown < o->top; i++) {
		if (rows[i].live_a == rows[i].live_b && rows[i].allocs_a == rows[i].allocs_b)
			continue;
		drow_print(&rows[i], o, j, shown++, pa, pb);
		sa += rows[i].live_a, sb += rows[i].live_b;
	}
	/* rows + other = the totals above: the rows left out (unchanged, or
	 * past --top) are one "other" row */
	if (o->json) {
		sb_printf(j, "],\"other\":{\"live_bytes_a\":%lld,\"live_bytes_b\":%lld}}",
			  (long long)(ta - sa), (long long)(tb - sb));
	} else {
		char x[16], y[16], z[16];
		if (ta != sa || tb != sb)
			printf("  %11s %11s %11s %9s %-9s other (%s)\n", human((tb - sb) - (ta - sa), x),
			       human(ta - sa, y), human(tb - sb, z), "", "",
			       shown < o->top ? "unchanged rows" : "unchanged, and the rows below");
		printf("%s\n", shown ? "" : "  (no change)\n");
	}
	free(rows);
	rows_free(ra, na);
	rows_free(rb, nb);
}

static int
cmp_start(const void *x, const void *y) {
	const struct mfile *a = *(struct mfile *const *)x, *b = *(struct mfile *const *)y;
	if (a->start_wall_ns != b->start_wall_ns)
		return a->start_wall_ns < b->start_wall_ns ? -1 : 1;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

static struct mfile **
by_start(struct run *r) {
	struct mfile **v = xcalloc(r->nfiles + 1, sizeof *v);
	for (size_t i = 0; i < r->nfiles; i++)
		v[i] = &r->files[i];
	if (r->nfiles)
		xqsort(v, r->nfiles, sizeof *v, cmp_start);
	return v;
}

/* Pairs of processes: by rank where both have one, else by command line
 * in the order they started.  Returns how many pairs were compared. */
static int
pair_runs(struct run *ra, struct run *rb, struct opts *o, struct sb *j) {
	struct mfile **a = by_start(ra), **b = by_start(rb);
	char *used = xcalloc(rb->nfiles + 1, 1);
	int pairs = 0;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < ra->nfiles; i++) {
			if (!a[i])
				continue;
			for (size_t k = 0; k < rb->nfiles; k++) {
				if (used[k])
					continue;
				int same = pass ? !strcmp(a[i]->argv, b[k]->argv) && b[k]->rank < 0 &&
							  a[i]->rank < 0
						: a[i]->rank >= 0 && a[i]->rank == b[k]->rank;
				if (!same)
					continue;
				compare(a[i], b[k], o, j, pairs++ == 0);
				used[k] = 1;
				a[i] = NULL;
				break;
			}
		}
	for (size_t i = 0; i < ra->nfiles && !o->json; i++)
		if (a[i])
			printf("(A's %s has no process in B to pair with)\n", a[i]->path);
	for (size_t k = 0; k < rb->nfiles && !o->json; k++)
		if (!used[k])
			printf("(B's %s has no process in A to pair with)\n", b[k]->path);
	free(a);
	free(b);
	free(used);
	return pairs;
}

int
cmd_diff(struct opts *o) {
	if (o->npaths != 2)
		die(EXIT_USAGE, "diff takes two inputs: A B (files, FILE@N, FILE@peak, or run "
				"directories); %d given", o->npaths);
	struct run a, b;
	cmd_load_paths(o, &a, &o->paths[0], 1);
	cmd_load_paths(o, &b, &o->paths[1], 1);
	struct sb j = {0};
	if (o->json)
		sb_puts(&j, "{\"pairs\":[");
	if (a.nfiles == 1 && b.nfiles == 1)
		compare(&a.files[0], &b.files[0], o, &j, 1);
	else if (!pair_runs(&a, &b, o, &j))
		die(EXIT_BAD_INPUT, "diff: no process of %s pairs with one of %s (by rank, or by "
				    "command line); name one file on each side",
		    o->paths[0], o->paths[1]);
	if (o->json) {
		sb_puts(&j, "]}\n");
		fputs(j.p, stdout);
		sb_free(&j);
	}
	return 0;
}
