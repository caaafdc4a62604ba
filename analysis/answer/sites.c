/* sites.c — naming call sites (sites.h). */
#include "answer/sites.h"
#include "read/symbolize.h"
#include <stdlib.h>
#include <string.h>

#define MAXF 160

/* One frame as a name shows it: "func (file.c:12)" with the short
 * function name, else what sym_text says. */
static void
frame_text(struct sb *s, const struct frame *fr, int with_line) {
	char t[512], sf[512];
	if (!fr->func) {
		sb_puts(s, sym_text(fr, t, sizeof t, 0));
		return;
	}
	sb_puts(s, site_short_func(fr->func, sf, sizeof sf));
	if (with_line && fr->file && fr->line) {
		const char *b = strrchr(fr->file, '/');
		sb_printf(s, " (%s:%d)", b ? b + 1 : fr->file, fr->line);
	} else if (with_line && !fr->python && fr->module) { /* no line: its module */
		const char *b = strrchr(fr->module, '/');
		sb_printf(s, " (%s)", b ? b + 1 : fr->module);
	}
}

const char *
site_name(const struct mfile *f, uint32_t stack, int ctx, char *buf, size_t n) {
	if (site_user_name(f, stack, buf, n))
		return buf;
	struct frame fr[MAXF];
	int nf = site_frames(f, stack, fr, MAXF);
	if (!nf) {
		snprintf(buf, n, "[unknown stack]");
		return buf;
	}
	int i = site_first_informative(fr, nf), has_py = 0;
	for (int k = 0; k < nf; k++)
		has_py |= fr[k].python == 1;
	struct sb s = {0};
	frame_text(&s, &fr[i], 1);
	/* In a Python process the innermost frame of the user's own code
	 * says where: "relu (functional.py:1457) < Net.forward (train.py:38)"
	 * ("< ... <" where frames between are left out). */
	if (fr[i].python == 1 && !site_py_user(&fr[i])) {
		int u = i + 1;
		while (u < nf && !site_py_user(&fr[u]))
			u++;
		if (u < nf) {
			sb_puts(&s, u == i + 1 ? " < " : " < ... < ");
			frame_text(&s, &fr[u], 1);
			i = u;
			ctx--;
		}
	}
	for (int k = 0, j = i + 1; j < nf && k < ctx; j++) {
		/* callers: function names only, to fit a line; never libc's
		 * start-up frames, nor an interpreter's unnamed frames where
		 * Python frames say more */
		if (sym_boring(&fr[j]) || (has_py && !fr[j].python && !fr[j].func))
			continue;
		sb_puts(&s, " < ");
		frame_text(&s, &fr[j], 0);
		k++;
	}
	snprintf(buf, n, "%s", s.p ? s.p : "");
	sb_free(&s);
	return buf;
}

/* Does this part of a name carry a line, "func (file.py:12)"?  Callers
 * are names only, so after the first part it is the user's own frame. */
static int
part_has_line(const char *p, size_t n) {
	if (n < 5 || p[n - 1] != ')')
		return 0;
	size_t i = n - 1;
	while (i > 0 && p[i - 1] >= '0' && p[i - 1] <= '9')
		i--;
	return i < n - 1 && i > 0 && p[i - 1] == ':' && memchr(p, '(', n);
}

static void
cut_end(char *s, size_t room) {
	if (strlen(s) <= room)
		return;
	size_t k = room > 3 ? room - 3 : 0; /* on a character boundary */
	while (k && ((unsigned char)s[k] & 0xc0) == 0x80)
		k--;
	strcpy(s + k, "...");
}

void
site_fit(char *name, int col) {
	int width = term_width();
	if (!width)
		return; /* not a terminal: whole names */
	size_t room = width - col > 24 ? (size_t)(width - col) : 24;
	/* the parts: the allocating frame, maybe the user's own line, callers */
	char *sep[64];
	int np = 0;
	for (char *p = name; np < 64 && (p = strstr(p, " < ")); p += 3)
		sep[np++] = p;
	int user = -1; /* the separator before the user's part */
	for (int i = 0; i < np && user < 0; i++) {
		char *b = sep[i] + 3, *e = i + 1 < np ? sep[i + 1] : b + strlen(b);
		if (part_has_line(b, (size_t)(e - b)))
			user = i;
	}
	/* callers go first, from the last */
	while (strlen(name) > room && np > (user >= 0 ? user + 1 : 1))
		*sep[--np] = 0;
	if (strlen(name) > room && user >= 0 && sep[user] > name) {
		/* then the allocating frame's own text, keeping the user's line */
		char rest[1024];
		snprintf(rest, sizeof rest, "%s", sep[user]);
		size_t keep = room > strlen(rest) + 8 ? room - strlen(rest) : 0;
		if (keep) {
			*sep[user] = 0;
			cut_end(name, keep);
			strcat(name, rest);
			return;
		}
	}
	cut_end(name, room);
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

static int
cmp_row(const void *a, const void *b) {
	const struct site_row *x = a, *y = b;
	if (x->v[0] != y->v[0])
		return x->v[0] < y->v[0] ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* The user's line of a stack with Python frames (site_user_key), kept
 * per Python stack (the user frame is one of them); 0 when it has none. */
static int
user_key_of(const struct mfile *f, const struct stack *st, uint32_t stack, char *buf,
	    size_t n, struct namer *nm) {
	if (f->native || f->by_site || !f->python || !st || st->py <= 0 ||
	    (size_t)st->py >= f->npystacks)
		return 0;
	if (!nm->byu) {
		nm->byu = xcalloc(f->npystacks, sizeof *nm->byu);
		nm->nu = f->npystacks;
	}
	char **slot = &nm->byu[st->py];
	if (!*slot)
		*slot = xstrdup(site_user_key(f, stack, buf, n) ? buf : "");
	if (!**slot)
		return 0;
	snprintf(buf, n, "%s", *slot);
	return 1;
}

/* A site's row name: the user's line in a Python process (user_key_of).
 * Else a stack whose native frames end at the interpreter
 * loop (cut there, format 2 on) has a name made of its Python frames alone
 * (its first informative frame is the innermost Python one, and only
 * Python frames follow it), so it is named once per Python stack: a
 * PyTorch import's 178 k sites have 19 k of them. */
const char *
site_group_name(const struct mfile *f, uint32_t stack, char *buf, size_t n, struct namer *nm) {
	const struct stack *st = stack && stack < f->nstacks ? &f->stacks[stack] : NULL;
	if (user_key_of(f, st, stack, buf, n, nm))
		return buf;
	if (f->native || !st || !st->pcs || st->n <= 0 || st->py <= 0 ||
	    (size_t)st->py >= f->npystacks || f->pystacks[st->py].n <= 0)
		return site_name(f, stack, 2, buf, n);
	struct frame fr[32];
	int k = sym_frames(f, st->pcs[st->n - 1], fr, 32);
	if (k <= 0 || !site_eval_loop(&fr[k - 1]))
		return site_name(f, stack, 2, buf, n);
	if (!nm->byp) {
		nm->byp = xcalloc(f->npystacks, sizeof *nm->byp);
		nm->n = f->npystacks;
	}
	char **slot = &nm->byp[st->py];
	if (!*slot) {
		site_name(f, stack, 2, buf, n);
		*slot = xstrdup(buf);
	}
	snprintf(buf, n, "%s", *slot);
	return buf;
}

void
namer_free(struct namer *nm) {
	for (size_t i = 0; nm->byp && i < nm->n; i++)
		free(nm->byp[i]);
	free(nm->byp);
	nm->byp = NULL;
	for (size_t i = 0; nm->byu && i < nm->nu; i++)
		free(nm->byu[i]);
	free(nm->byu);
	nm->byu = NULL;
}

struct site_row *
site_rows(const struct mfile *f, const struct site *v, size_t n, int kind, int apart, int limit,
	  int at_peak, size_t *nr) {
	struct site_row *r = NULL;
	size_t m = 0, cap = 0;
	struct namer nm = {0};
	struct keyix ix = {0}; /* kind byte, name -> row index + 1 */
	for (size_t i = 0; i < n && (apart ? (int)m < limit : 1); i++) {
		if (kind >= 0 && v[i].kind != kind)
			continue;
		if (at_peak && v[i].at_peak_bytes <= 0)
			continue;
		char key[1025], *name = key + 1;
		key[0] = (char)(v[i].kind + 1);
		site_group_name(f, v[i].stack, name, sizeof key - 1, &nm);
		int fresh = 1;
		uint64_t *slot = apart ? NULL : keyix_slot(&ix, key, 1 + strlen(name), &fresh);
		size_t k = fresh ? m : *slot - 1;
		if (fresh) {
			r = xgrow(r, m + 1, &cap, sizeof *r);
			memset(&r[m], 0, sizeof r[m]);
			r[m].name = xstrdup(name);
			r[m].kind = v[i].kind;
			r[m].stack = v[i].stack;
			m++;
			if (slot)
				*slot = m;
		}
		r[k].nsites++;
		if (at_peak) {
			r[k].v[0] += v[i].at_peak_bytes;
			r[k].v[1] += v[i].live_bytes;
		} else {
			r[k].v[0] += v[i].live_bytes;
			r[k].v[1] += v[i].live_count;
			r[k].v[2] += v[i].allocs;
			r[k].v[3] += v[i].alloc_bytes;
			r[k].asked += v[i].asked_bytes >= 0 ? v[i].asked_bytes : v[i].alloc_bytes;
		}
	}
	keyix_free(&ix);
	namer_free(&nm);
	for (size_t k = 0; k < m; k++) /* the largest site's path */
		r[k].name = site_label(f, r[k].name, r[k].stack);
	xqsort(r, m, sizeof *r, cmp_row);
	*nr = m;
	return r;
}

void
site_row_name(const struct site_row *r, int col, int whole, char *out, size_t n) {
	if (r->nsites > 1)
		snprintf(out, n, "%s [%d sites]", r->name, r->nsites);
	else
		snprintf(out, n, "%s", r->name);
	if (!whole)
		site_fit(out, col);
}

void
site_rows_free(struct site_row *r, size_t n) {
	for (size_t i = 0; i < n; i++)
		free(r[i].name);
	free(r);
}

size_t
sites_on_device(const struct mfile *f, struct site *v, size_t n, int dev) {
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (stack_device(f, v[i].stack) == dev)
			v[k++] = v[i];
	return k;
}
