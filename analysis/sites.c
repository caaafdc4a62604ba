/* sites.c — naming call sites (sites.h). */
#include "sites.h"
#include "symbolize.h"
#include <stdlib.h>
#include <string.h>

#define MAXF 160

int sites_native_only;

static int
is_eval_loop(const struct frame *fr) {
	return fr->func && !strcmp(fr->func, "_PyEval_EvalFrameDefault");
}

static struct frame
py_frame(const struct pyframe *p) {
	return (struct frame){.func = p->func, .file = p->file, .line = p->line,
			      .module = "[python]", .status = SYM_OK, .python = 1};
}

/* Hybrid: the k-th native _PyEval_EvalFrameDefault frame (innermost first)
 * is replaced by the k-th run of Python frames (a run ends at a frame with
 * its entry bit); Python frames left over (a native stack cut at
 * MEMTALLY_DEPTH) go at the outer end.  A thread with no Python frame in a
 * Python process gets a "[no Python frame]" mark as its outermost frame. */
int
site_frames(const struct mfile *f, uint32_t stack, struct frame *out, int max) {
	if (!stack || stack >= f->nstacks)
		return 0;
	const struct stack *st = &f->stacks[stack];
	struct frame nat[MAXF];
	int nn = 0;
	for (int i = 0; st->pcs && i < st->n && nn < MAXF; i++)
		nn += sym_frames(f, st->pcs[i], nat + nn, MAXF - nn);
	const struct pystack *ps = !sites_native_only && st->py > 0 &&
					   (size_t)st->py < f->npystacks
				   ? &f->pystacks[st->py]
				   : NULL;
	int n = 0, k = 0; /* k: next Python frame */
	for (int i = 0; i < nn && n < max; i++) {
		if (!ps || k >= ps->n || !is_eval_loop(&nat[i])) {
			out[n++] = nat[i];
			continue;
		}
		do
			out[n++] = py_frame(&f->pyframes[ps->frames[k]]);
		while (!ps->entry[k++] && k < ps->n && n < max);
	}
	while (ps && k < ps->n && n < max)
		out[n++] = py_frame(&f->pyframes[ps->frames[k++]]);
	if (!sites_native_only && st->py == 0 && f->python && n < max)
		out[n++] = (struct frame){.func = "[no Python frame]", .module = "[python]",
					  .status = SYM_OK, .python = 2};
	return n;
}

/* The first informative frame: the innermost Python one if any, else the
 * first native frame that is not the allocator's or the runtime's. */
int
site_first_informative(const struct frame *fr, int nf) {
	for (int i = 0; i < nf; i++)
		if (fr[i].python == 1)
			return i;
	int i = 0;
	while (i < nf && sym_boring(&fr[i]))
		i++;
	return i == nf ? 0 : i;
}


const char *
site_name(const struct mfile *f, uint32_t stack, int ctx, char *buf, size_t n) {
	struct frame fr[MAXF];
	int nf = site_frames(f, stack, fr, MAXF);
	if (!nf) {
		snprintf(buf, n, "[unknown stack]");
		return buf;
	}
	int i = site_first_informative(fr, nf);
	struct sb s = {0};
	char t[512];
	for (int k = 0; i < nf && k <= ctx; i++, k++) {
		if (k && sym_boring(&fr[i])) { /* libc's start-up frames */
			k--;
			continue;
		}
		if (k)
			sb_puts(&s, " < ");
		if (k) { /* callers: function name only, to fit a line */
			sb_puts(&s, fr[i].func ? fr[i].func : sym_text(&fr[i], t, sizeof t, 0));
		} else {
			sb_puts(&s, sym_text(&fr[i], t, sizeof t, 0));
		}
	}
	snprintf(buf, n, "%s", s.p ? s.p : "");
	sb_free(&s);
	return buf;
}

const char *
site_func(const struct mfile *f, uint32_t stack, char *buf, size_t n) {
	struct frame fr[MAXF];
	int nf = site_frames(f, stack, fr, MAXF);
	int i = site_first_informative(fr, nf);
	if (!nf)
		snprintf(buf, n, "[unknown]");
	else if (fr[i].func)
		snprintf(buf, n, "%s", fr[i].func);
	else
		sym_text(&fr[i], buf, n, 0);
	return buf;
}

char *
site_key(const struct mfile *f, uint32_t stack, int kind) {
	struct sb s = {0};
	sb_puts(&s, kind_names[kind]);
	if (stack && stack < f->nstacks && f->stacks[stack].pcs) {
		const struct stack *st = &f->stacks[stack];
		for (int i = 0; i < st->n; i++) {
			const struct module *m = file_module(f, st->pcs[i]);
			const char *b = m ? strrchr(m->path, '/') : NULL;
			sb_printf(&s, "|%s+%llx", m ? (b ? b + 1 : m->path) : "?",
				  (unsigned long long)(m ? st->pcs[i] - m->base : st->pcs[i]));
		}
		if (st->py > 0 && (size_t)st->py < f->npystacks) {
			const struct pystack *ps = &f->pystacks[st->py];
			for (int i = 0; i < ps->n; i++) {
				const struct pyframe *p = &f->pyframes[ps->frames[i]];
				sb_printf(&s, "|py:%s:%d:%s%s", p->file, p->line, p->func,
					  ps->entry[i] ? "!" : "");
			}
		}
	}
	return s.p;
}

void
site_print_stack(FILE *out, const struct mfile *f, uint32_t stack, const char *prefix) {
	struct frame fr[MAXF];
	int nf = site_frames(f, stack, fr, MAXF);
	char t[1024];
	if (!nf)
		fprintf(out, "%s[unknown stack]\n", prefix);
	for (int i = 0; i < nf; i++)
		fprintf(out, "%s%s\n", prefix, sym_text(&fr[i], t, sizeof t, 1));
}

void
site_json_stack(struct sb *s, const struct mfile *f, uint32_t stack) {
	struct frame fr[MAXF];
	int nf = site_frames(f, stack, fr, MAXF);
	sb_putc(s, '[');
	for (int i = 0; i < nf; i++) {
		if (i)
			sb_putc(s, ',');
		sb_puts(s, "{\"function\":");
		if (fr[i].func)
			sb_json_str(s, fr[i].func);
		else
			sb_puts(s, "null");
		sb_puts(s, ",\"file\":");
		if (fr[i].file)
			sb_json_str(s, fr[i].file);
		else
			sb_puts(s, "null");
		sb_printf(s, ",\"line\":%d,\"inlined\":%s,\"module\":", fr[i].line,
			  fr[i].inlined ? "true" : "false");
		sb_json_str(s, fr[i].module ? fr[i].module : "?");
		static const char *st[] = {"ok", "no_symbol", "module_gone", "build_id_differs",
					   "no_module"};
		sb_printf(s, ",\"offset\":\"0x%llx\",\"status\":\"%s\"%s}",
			  (unsigned long long)fr[i].offset, st[fr[i].status],
			  fr[i].python == 1 ? ",\"python\":true" : "");
	}
	sb_putc(s, ']');
}

static int
cmp_live(const void *a, const void *b) {
	const struct site *x = a, *y = b;
	if (x->live_bytes != y->live_bytes)
		return x->live_bytes < y->live_bytes ? 1 : -1;
	if (x->alloc_bytes != y->alloc_bytes)
		return x->alloc_bytes < y->alloc_bytes ? 1 : -1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

struct site *
sites_sorted(struct mfile *f, const struct snap *s, size_t *n) {
	struct site *v = snap_sites(f, s, n);
	xqsort(v, *n, sizeof *v, cmp_live);
	return v;
}

void
site_json_names(struct sb *j, const struct mfile *f, uint32_t stack) {
	char name[512];
	sb_puts(j, "\"function\":");
	sb_json_str(j, site_func(f, stack, name, sizeof name));
	sb_puts(j, ",\"where\":");
	sb_json_str(j, site_name(f, stack, 2, name, sizeof name));
	sb_puts(j, ",\"frames\":");
	site_json_stack(j, f, stack);
}
