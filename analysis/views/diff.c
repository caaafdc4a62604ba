/* diff.c — `memtally diff A B`: the change per call site between two
 * snapshots.  A and B are files (last snapshot), FILE@SEQ (that snapshot),
 * or directories (one file each, or files paired by rank).  Call sites are
 * matched by module and offset of every frame, so two runs of the same
 * binaries compare even though ASLR moved them. */
#include "cmd.h"
#include "answer/sites.h"
#include "base/util.h"
#include <stdlib.h>
#include <string.h>

struct side {
	struct run r;
	int64_t seq; /* -1: last */
};

static void
load_side(struct side *s, const char *arg) {
	char *a = xstrdup(arg), *at = strrchr(a, '@');
	s->seq = -1;
	if (at && at[1] && strspn(at + 1, "0123456789") == strlen(at + 1)) {
		s->seq = atoll(at + 1);
		*at = 0;
	}
	run_load(&s->r, &a, 1);
	free(a);
}

struct row {
	char *key;
	const struct mfile *fa, *fb;
	uint32_t sa, sb;
	int kind;
	int64_t live_a, live_b, count_a, count_b, allocs_a, allocs_b;
};

static int
cmp_row(const void *x, const void *y) {
	const struct row *a = x, *b = y;
	int64_t da = llabs(a->live_b - a->live_a), db = llabs(b->live_b - b->live_a);
	if (da != db)
		return da < db ? 1 : -1;
	return strcmp(a->key, b->key);
}

static int
cmp_key(const void *x, const void *y) {
	return strcmp(((const struct row *)x)->key, ((const struct row *)y)->key);
}

static void
compare(struct mfile *fa, const struct snap *a, struct mfile *fb,
	const struct snap *b, struct opts *o, struct sb *j, int first) {
	size_t nsa, nsb, nr = 0;
	struct site *sa = snap_sites(fa, a, &nsa), *sb_ = snap_sites(fb, b, &nsb);
	struct row *rows = xcalloc(nsa + nsb + 1, sizeof *rows);
	for (size_t i = 0; i < nsa; i++) {
		const struct site *s = &sa[i];
		if (o->kind >= 0 && s->kind != o->kind)
			continue;
		struct row *r = &rows[nr++];
		r->key = site_key(fa, s->stack, s->kind);
		r->fa = fa, r->sa = s->stack, r->kind = s->kind;
		r->live_a = s->live_bytes, r->count_a = s->live_count, r->allocs_a = s->allocs;
	}
	xqsort(rows, nr, sizeof *rows, cmp_key);
	size_t na = nr;
	for (size_t i = 0; i < nsb; i++) {
		const struct site *s = &sb_[i];
		if (o->kind >= 0 && s->kind != o->kind)
			continue;
		char *key = site_key(fb, s->stack, s->kind);
		struct row probe = {.key = key};
		struct row *r = na ? bsearch(&probe, rows, na, sizeof *rows, cmp_key) : NULL;
		if (r) {
			free(key);
		} else {
			r = &rows[nr++];
			r->key = key;
			r->kind = s->kind;
		}
		r->fb = fb, r->sb = s->stack;
		r->live_b += s->live_bytes, r->count_b += s->live_count, r->allocs_b += s->allocs;
	}
	xqsort(rows, nr, sizeof *rows, cmp_row);
	int64_t ta = 0, tb = 0;
	for (size_t i = 0; i < nr; i++)
		ta += rows[i].live_a, tb += rows[i].live_b;
	char la[128], lb[128], x[16], y[16], z[16], name[512];
	if (o->json) {
		if (!first)
			sb_putc(j, ',');
		sb_puts(j, "{\"a\":{\"file\":");
		sb_json_str(j, fa->path);
		sb_printf(j, ",\"seq\":%lld},\"b\":{\"file\":", (long long)a->seq);
		sb_json_str(j, fb->path);
		sb_printf(j, ",\"seq\":%lld},\"live_bytes_a\":%lld,\"live_bytes_b\":%lld,\"callsites\":[",
			  (long long)b->seq, (long long)ta, (long long)tb);
	} else {
		printf("== A: %s seq %lld (%s)\n   B: %s seq %lld (%s)\n", file_label(fa, la, sizeof la),
		       (long long)a->seq, a->reason, file_label(fb, lb, sizeof lb), (long long)b->seq,
		       b->reason);
		printf("  live: %s -> %s (%s)\n", human(ta, x), human(tb, y), human(tb - ta, z));
		printf("  %11s %11s %11s %9s %-9s %s\n", "change", "A live", "B live", "B count", "kind",
		       "where");
	}
	int shown = 0;
	for (size_t i = 0; i < nr && shown < o->top; i++) {
		struct row *r = &rows[i];
		if (r->live_a == r->live_b && r->allocs_a == r->allocs_b)
			continue;
		const struct mfile *f = r->fb ? r->fb : r->fa;
		uint32_t st = r->fb ? r->sb : r->sa;
		if (o->json) {
			if (shown)
				sb_putc(j, ',');
			sb_printf(j, "{\"kind\":\"%s\",\"change_bytes\":%lld,\"live_bytes_a\":%lld,"
				     "\"live_bytes_b\":%lld,\"live_count_a\":%lld,\"live_count_b\":%lld,"
				     "\"allocs_a\":%lld,\"allocs_b\":%lld,",
				  kind_names[r->kind], (long long)(r->live_b - r->live_a),
				  (long long)r->live_a, (long long)r->live_b, (long long)r->count_a,
				  (long long)r->count_b, (long long)r->allocs_a, (long long)r->allocs_b);
			site_json_names(j, f, st);
			sb_putc(j, '}');
		} else {
			site_name(f, st, 2, name, sizeof name);
			if (!o->stacks)
				site_fit(name, 58);
			printf("  %11s %11s %11s %9lld %-9s %s%s\n", human(r->live_b - r->live_a, x),
			       human(r->live_a, y), human(r->live_b, z), (long long)r->count_b,
			       kind_names[r->kind], name,
			       !r->fa ? " [new]" : !r->fb ? " [gone]" : "");
			if (o->stacks)
				site_print_stack(stdout, f, st, "        ");
		}
		shown++;
	}
	if (o->json)
		sb_puts(j, "]}");
	else
		printf("%s\n", shown ? "" : "  (no change)\n");
	for (size_t i = 0; i < nr; i++)
		free(rows[i].key);
	free(rows);
	free(sa);
	free(sb_);
}

int
cmd_diff(struct opts *o) {
	if (o->npaths != 2)
		usage_exit("diff takes two inputs: A B (files, FILE@SEQ, or run directories)");
	struct side a, b;
	load_side(&a, o->paths[0]);
	load_side(&b, o->paths[1]);
	struct sb j = {0};
	if (o->json)
		sb_puts(&j, "{\"pairs\":[");
	int pairs = 0;
	if (a.r.nfiles == 1 && b.r.nfiles == 1) {
		compare(&a.r.files[0], pick_snapshot(&a.r.files[0], a.seq, o->kind), &b.r.files[0],
			pick_snapshot(&b.r.files[0], b.seq, o->kind), o, &j, 1);
		pairs = 1;
	} else {
		for (size_t i = 0; i < a.r.nfiles; i++) {
			struct mfile *fa = &a.r.files[i];
			for (size_t k = 0; k < b.r.nfiles; k++) {
				struct mfile *fb = &b.r.files[k];
				if (fa->rank < 0 || fa->rank != fb->rank)
					continue;
				compare(fa, pick_snapshot(fa, a.seq, o->kind), fb, pick_snapshot(fb, b.seq, o->kind), o, &j,
					pairs == 0);
				pairs++;
			}
		}
		if (!pairs)
			die(EXIT_BAD_INPUT, "diff: %s and %s hold several processes and no ranks match; "
					    "name one file on each side", o->paths[0], o->paths[1]);
	}
	if (o->json) {
		sb_puts(&j, "]}\n");
		fputs(j.p, stdout);
		sb_free(&j);
	}
	return 0;
}
