/* functions.c — `memtally functions`: live bytes summed per function, as
 * heaptrack's "merged per function" view: inclusive (every call site with
 * the function anywhere in its stack, counted once a site) and self (the
 * sites named by it, as `report` names them).  A function that allocates
 * through many call sites, none large alone, shows here: a C++ library's
 * static constructors under Python's import machinery, a dispatcher that
 * registers names from everywhere.  Hybrid stacks (Python frames where
 * the interpreter ran them) keep the native frames under the innermost
 * Python frame, so the native cause of a Python row is here without
 * --native.  A call site named by a frame without a symbol counts, as its
 * self, under that frame's module ("[python3.11]"); unnamed frames are
 * not summed inclusively (the interpreter's own would top every list).
 * Each function says the lines its bytes came through, most first
 * ("<module> (train.py:35,29)"). */
#include "cmd/cmd.h"
#include "answer/sites.h"
#include "read/symbolize.h"
#include "base/util.h"
#include <stdlib.h>
#include <string.h>

#define FN_LINES 4
struct fn {
	char *name;      /* the function as shown */
	char *where;     /* its file (Python, or with debug info) or module */
	int64_t incl, self, incl_count, self_count;
	uint32_t last_site; /* the last site counted in incl, + 1 */
	/* the lines its inclusive bytes came through, most first (a module's
	 * <module> reaches every line of a script: which ones held it) */
	int line[FN_LINES];
	int64_t line_bytes[FN_LINES];
	int more_lines;
};

/* Count bytes under the function's line ln (0: none known). */
static void
fn_line(struct fn *fn, int ln, int64_t bytes) {
	if (ln <= 0)
		return;
	for (int i = 0; i < FN_LINES; i++) {
		if (fn->line[i] == ln || !fn->line[i]) {
			fn->line[i] = ln;
			fn->line_bytes[i] += bytes;
			for (; i > 0 && fn->line_bytes[i] > fn->line_bytes[i - 1]; i--) {
				int l = fn->line[i];
				int64_t b = fn->line_bytes[i];
				fn->line[i] = fn->line[i - 1], fn->line_bytes[i] = fn->line_bytes[i - 1];
				fn->line[i - 1] = l, fn->line_bytes[i - 1] = b;
			}
			return;
		}
	}
	fn->more_lines = 1;
}

/* "file:12,40" (the lines, most first) or the file alone. */
static void
fn_where(const struct fn *fn, char *buf, size_t n) {
	int k = snprintf(buf, n, "%s", fn->where);
	for (int i = 0; i < FN_LINES && fn->line[i] && k < (int)n; i++)
		k += snprintf(buf + k, n - (size_t)k, "%c%d", i ? ',' : ':', fn->line[i]);
	if (fn->more_lines && k < (int)n)
		snprintf(buf + k, n - (size_t)k, ",...");
}

struct fntab {
	struct fn *v;
	size_t n, cap;
	struct keyix ix; /* name NUL where -> index + 1 */
};

static struct fn *
fn_get(struct fntab *t, const char *name, const char *where) {
	char key[1100];
	int kn = snprintf(key, sizeof key, "%s%c%s", name, 0, where);
	int fresh;
	uint64_t *slot = keyix_slot(&t->ix, key, kn < (int)sizeof key ? (size_t)kn : sizeof key - 1, &fresh);
	if (!fresh)
		return &t->v[*slot - 1];
	t->v = xgrow(t->v, t->n + 1, &t->cap, sizeof *t->v);
	struct fn *f = &t->v[t->n];
	memset(f, 0, sizeof *f);
	f->name = xstrdup(name);
	f->where = xstrdup(where);
	*slot = ++t->n;
	return f;
}

/* A frame's function and where it is, as this view groups them. */
static void
frame_key(const struct frame *fr, char *name, size_t nn, char *where, size_t wn) {
	const char *mod = fr->module ? fr->module : "?";
	const char *mb = strrchr(mod, '/') ? strrchr(mod, '/') + 1 : mod;
	if (fr->python == 2) { /* the "[no Python frame]" mark */
		snprintf(name, nn, "%s", fr->func);
		snprintf(where, wn, "%s", "");
	} else if (fr->func) {
		char sf[512];
		snprintf(name, nn, "%s", site_short_func(fr->func, sf, sizeof sf));
		const char *file = fr->file;
		if (file) {
			const char *b = strrchr(file, '/');
			snprintf(where, wn, "%s", b ? b + 1 : file);
		} else {
			snprintf(where, wn, "%s", mb);
		}
	} else { /* no symbol: its module stands for it */
		snprintf(name, nn, "[%s]", fr->status == SYM_NOMODULE ? "no module" : mb);
		snprintf(where, wn, "%s", "");
	}
}

static int
cmp_fn(const void *a, const void *b) {
	const struct fn *x = a, *y = b;
	if (x->incl != y->incl)
		return x->incl < y->incl ? 1 : -1;
	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* Count one call site's live bytes: self under the frame that names it,
 * inclusive under every function on its stack, once a site (recursion).
 * The native frames under a Python frame are the native cause; the
 * allocator's, libc's and the C++ runtime's own are left out, as
 * everywhere. */
static void
count_site(struct fntab *t, struct mfile *f, const struct site *v, size_t site) {
	int64_t bytes = v->live_bytes, count = v->live_count;
	struct frame fr[256];
	int nf = site_frames(f, v->stack, fr, 256);
	int first_inf = nf ? site_first_informative(fr, nf) : 0;
	for (int k = 0; k < nf; k++) {
		if (k != first_inf && (sym_boring(&fr[k]) || (!fr[k].func && !fr[k].python)))
			continue; /* an unnamed frame is no function to sum */
		char name[512], where[512];
		frame_key(&fr[k], name, sizeof name, where, sizeof where);
		struct fn *fn = fn_get(t, name, where);
		if (k == first_inf) {
			fn->self += bytes;
			fn->self_count += count;
		}
		if (fn->last_site != site) {
			fn->last_site = (uint32_t)site;
			fn->incl += bytes;
			fn->incl_count += count;
			fn_line(fn, fr[k].line, bytes);
		}
	}
}

static void
print_json(struct sb *j, struct mfile *f, const struct fntab *t, const struct snap *s, int at_peak,
	   int64_t total, int top, int first) {
	if (!first)
		sb_putc(j, ',');
	file_json_head(j, f);
	sb_printf(j, ",\"seq\":%lld,\"at\":\"%s\",\"total_bytes\":%lld,\"functions\":[",
		  (long long)s->seq, at_peak ? "peak" : "snapshot", (long long)total);
	for (size_t i = 0; i < t->n && (int)i < top; i++) {
		const struct fn *fn = &t->v[i];
		if (i)
			sb_putc(j, ',');
		sb_puts(j, "{\"function\":");
		sb_json_str(j, fn->name);
		sb_puts(j, ",\"where\":");
		sb_json_str(j, fn->where);
		sb_printf(j, ",\"inclusive_bytes\":%lld,\"self_bytes\":%lld,\"lines\":[",
			  (long long)fn->incl, (long long)fn->self);
		for (int k = 0; k < FN_LINES && fn->line[k]; k++)
			sb_printf(j, "%s{\"line\":%d,\"bytes\":%lld}", k ? "," : "", fn->line[k],
				  (long long)fn->line_bytes[k]);
		sb_puts(j, "]}");
	}
	sb_puts(j, "]}");
}

static void
print_text(struct mfile *f, const struct fntab *t, const struct snap *s, int at_peak, int64_t total,
	   int top, int gpu) {
	char a[16], b[16];
	file_title(f);
	if (at_peak && gpu)
		printf("  live bytes per function at GPU %d's peak, %s in all:\n", gpu - 1,
		       human(total, a));
	else if (at_peak)
		printf("  live bytes per function at the peak (each kind at its high-water mark), "
		       "%s in all:\n", human(total, a));
	else
		printf("  live bytes per function at snapshot %lld (%s), %s in all:\n",
		       (long long)s->seq, s->reason, human(total, a));
	printf("  %11s %6s %11s  %s\n", "inclusive", "", "self", "function");
	int64_t shown = 0;
	for (size_t i = 0; i < t->n && (int)i < top; i++) {
		char line[1100], wh[600];
		shown += t->v[i].self;
		fn_where(&t->v[i], wh, sizeof wh);
		snprintf(line, sizeof line, "%s (%s)", t->v[i].name, wh);
		if (!t->v[i].where[0])
			snprintf(line, sizeof line, "%s", t->v[i].name);
		site_fit(line, 34);
		printf("  %11s %5.1f%% %11s  %s\n", human(t->v[i].incl, a),
		       total ? 100.0 * (double)t->v[i].incl / (double)total : 0.0,
		       human(t->v[i].self, b), line);
	}
	/* rows add up: self bytes of the rows below --top, and bytes in no
	 * call site the file lists (MEMTALLY_TOP), are one row */
	if (total - shown > 0)
		printf("  %11s %6s %11s  other (%s)\n", "", "", human(total - shown, a),
		       (int)t->n > top ? "the functions below" : "call sites not in the file");
	else if (!t->n)
		printf("  (nothing live)\n");
	printf("\n");
}

static void
fntab_free(struct fntab *t) {
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].name), free(t->v[i].where);
	free(t->v);
	keyix_free(&t->ix);
}

static void
one_file(struct mfile *f, struct opts *o, struct sb *j, int first) {
	const struct snap *s;
	size_t n;
	int at_peak;
	struct site *v = answer_sites(f, &o->ask, &s, &at_peak, &n);
	struct fntab t = {0};
	int64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if ((o->kind >= 0 && v[i].kind != o->kind) || v[i].live_bytes <= 0)
			continue;
		total += v[i].live_bytes;
		count_site(&t, f, &v[i], i + 1); /* sites numbered from 1 */
	}
	free(v);
	/* the heading's total is the process's: at the peak each kind's
	 * high-water mark, else the snapshot's live bytes (more than its call
	 * sites' when the file lists only the largest: MEMTALLY_TOP) */
	int64_t whole = 0;
	for (int k = 0; k < NKINDS && !o->ask.only_gpu; k++)
		if ((o->kind < 0 || o->kind == k) && s->tot[k].present)
			whole += at_peak ? s->tot[k].peak_bytes : s->tot[k].live_bytes;
	if (!o->json && whole > total)
		total = whole;
	xqsort(t.v, t.n, sizeof *t.v, cmp_fn);
	if (o->json)
		print_json(j, f, &t, s, at_peak, total, o->top, first);
	else
		print_text(f, &t, s, at_peak, total, o->top, o->ask.only_gpu);
	fntab_free(&t);
}

int
cmd_functions(struct opts *o) {
	struct run r;
	cmd_list(o, &r, 0); /* read one at a time */
	return each_file(&r, o, "processes", one_file);
}
