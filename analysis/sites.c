/* sites.c — naming call sites (sites.h). */
#include "sites.h"
#include "symbolize.h"
#include <stdlib.h>
#include <string.h>

#define MAXF 64

/* All frames of a stack, inline chains expanded. */
static int
frames(const struct mfile *f, uint32_t stack, struct frame *out, int max) {
	if (!stack || stack >= f->nstacks || !f->stacks[stack].pcs)
		return 0;
	const struct stack *st = &f->stacks[stack];
	int n = 0;
	for (int i = 0; i < st->n && n < max; i++)
		n += sym_frames(f, st->pcs[i], out + n, max - n);
	return n;
}

const char *
site_name(const struct mfile *f, uint32_t stack, int ctx, char *buf, size_t n) {
	struct frame fr[MAXF];
	int nf = frames(f, stack, fr, MAXF);
	if (!nf) {
		snprintf(buf, n, "[unknown stack]");
		return buf;
	}
	int i = 0;
	while (i < nf && sym_boring(&fr[i]))
		i++;
	if (i == nf)
		i = 0;
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
	int nf = frames(f, stack, fr, MAXF);
	int i = 0;
	while (i < nf && sym_boring(&fr[i]))
		i++;
	if (i == nf)
		i = 0;
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
	}
	return s.p;
}

void
site_print_stack(FILE *out, const struct mfile *f, uint32_t stack, const char *prefix) {
	struct frame fr[MAXF];
	int nf = frames(f, stack, fr, MAXF);
	char t[1024];
	if (!nf)
		fprintf(out, "%s[unknown stack]\n", prefix);
	for (int i = 0; i < nf; i++)
		fprintf(out, "%s%s\n", prefix, sym_text(&fr[i], t, sizeof t, 1));
}

void
site_json_stack(struct sb *s, const struct mfile *f, uint32_t stack) {
	struct frame fr[MAXF];
	int nf = frames(f, stack, fr, MAXF);
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
		sb_printf(s, ",\"offset\":\"0x%llx\",\"status\":\"%s\"}",
			  (unsigned long long)fr[i].offset, st[fr[i].status]);
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
	qsort(v, *n, sizeof *v, cmp_live);
	return v;
}
