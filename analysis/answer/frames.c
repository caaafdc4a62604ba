/* frames.c — a call site's frames as views print them (sites.h): the
 * native stack with the Python frames in place of the interpreter's
 * loops, and memtally's own frames left out of every stack; the first
 * informative frame; short function names.  Below userline.c (the user's
 * line) and sites.c (names and rows). */
#include "answer/sites.h"
#include "base/util.h"
#include "read/symbolize.h"
#include "base/keyix.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAXF 160

/* ---- memtally's own frames ---- */

const char *
site_base_name(const char *p) {
	const char *b = strrchr(p, '/');
	return b ? b + 1 : p;
}

/* Does the directory of path hold memtally's Python scripts (a sibling
 * memtally_torch.py, or the private package _memtally/)?  Answers kept
 * per path (analysis is one thread). */
static int
beside_memtally(const char *path) {
	static struct keyix seen; /* path -> 1 + answer */
	int fresh;
	uint64_t *v = keyix_slot(&seen, path, strlen(path), &fresh);
	if (!fresh)
		return (int)*v - 1;
	const char *b = site_base_name(path);
	char dir[4096], p[4200];
	snprintf(dir, sizeof dir, "%.*s", (int)(b - path), path);
	struct stat st;
	snprintf(p, sizeof p, "%smemtally_torch.py", dir);
	int yes = !stat(p, &st);
	snprintf(p, sizeof p, "%s_memtally", dir);
	yes |= !stat(p, &st) && S_ISDIR(st.st_mode);
	*v = 1 + (uint64_t)yes;
	return yes;
}

static int
has_memtally(const char *s) {
	return s && (strstr(s, "memtally") || strstr(s, "Memtally"));
}

int
site_own_frame(const struct frame *fr) {
	if (fr->python != 1 || !fr->file)
		return 0;
	const char *f = fr->file, *b = site_base_name(f);
	if (strstr(f, "/_memtally/") || !strncmp(f, "_memtally/", 10))
		return 1;
	if (!strcmp(b, "memtally_torch.py") || !strcmp(b, "memtally_cuda.py"))
		return 1;
	/* the start-up hook, and the user API beside it (a program's own
	 * sitecustomize.py or memtally.py elsewhere is the program's) */
	if (!strcmp(b, "sitecustomize.py"))
		return has_memtally(fr->func) || beside_memtally(f);
	if (!strcmp(b, "memtally.py"))
		return beside_memtally(f);
	return 0;
}

static int
frozen_importlib(const struct frame *fr) {
	return fr->python == 1 && fr->file && !strncmp(fr->file, "<frozen importlib", 17);
}

/* Drop memtally's own frames, and the importlib frames that only lead
 * into them (all Python frames inside them memtally's): the hook's
 * exec_module wrapper, called by importlib's _load_unlocked, is gone and
 * torch's import reads as the program's `import torch`. */
int
site_drop_own(struct frame *fr, int n) {
	int m = 0, own_only = 1, seen_own = 0;
	for (int i = 0; i < n; i++) {
		if (fr[i].python == 1) {
			if (site_own_frame(&fr[i])) {
				seen_own = 1;
				continue;
			}
			if (own_only && seen_own && frozen_importlib(&fr[i]))
				continue;
			own_only = 0;
		}
		fr[m++] = fr[i];
	}
	return m;
}

int
site_eval_loop(const struct frame *fr) {
	return fr->func && !strcmp(fr->func, "_PyEval_EvalFrameDefault");
}

static struct frame
py_frame(const struct pyframe *p) {
	return (struct frame){.func = p->func, .file = p->file, .line = p->line,
			      .module = "[python]", .status = SYM_OK, .python = 1};
}

/* The mark standing for the Python frames a stack past MEMTALLY_PYDEPTH
 * left out between its two ends: "[N Python frames left out]" (a mark,
 * as "[no Python frame]": python 2, named by no row). */
static struct frame
py_elided(int64_t n) {
	static struct keyix names; /* count -> its text, kept for good */
	int fresh;
	uint64_t *v = keyix_slot(&names, (const char *)&n, sizeof n, &fresh);
	if (fresh) {
		char t[64];
		snprintf(t, sizeof t, "[%lld Python frame%s left out]", (long long)n, n == 1 ? "" : "s");
		*v = (uint64_t)(uintptr_t)xstrdup(t);
	}
	return (struct frame){.func = (const char *)(uintptr_t)*v, .module = "[python]",
			      .status = SYM_OK, .python = 2};
}

/* Python frame k of ps into out[*n], after the mark of the frames left
 * out before it when there is one (and room). */
static void
py_put(const struct mfile *f, const struct pystack *ps, int k, struct frame *out, int *n, int max) {
	if (ps->elided > 0 && k == ps->elided_at && *n < max - 1)
		out[(*n)++] = py_elided(ps->elided);
	out[(*n)++] = py_frame(&f->pyframes[ps->frames[k]]);
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
	const struct pystack *ps = !f->native && st->py > 0 &&
					   (size_t)st->py < f->npystacks
				   ? &f->pystacks[st->py]
				   : NULL;
	int n = 0, k = 0; /* k: next Python frame */
	for (int i = 0; i < nn && n < max; i++) {
		if (!ps || k >= ps->n || !site_eval_loop(&nat[i])) {
			out[n++] = nat[i];
			continue;
		}
		do
			py_put(f, ps, k, out, &n, max);
		while (!ps->entry[k++] && k < ps->n && n < max);
	}
	while (ps && k < ps->n && n < max)
		py_put(f, ps, k++, out, &n, max);
	if (!f->native && st->py == 0 && f->python && n < max)
		out[n++] = (struct frame){.func = "[no Python frame]", .module = "[python]",
					  .status = SYM_OK, .python = 2};
	return ps ? site_drop_own(out, n) : n;
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


/* func without its parameter list (and a trailing " const"): C++ names
 * such as "ggc_internal_alloc(unsigned long, void (*)(void*), ...)" made
 * every row of a report read alike. */
const char *
site_short_func(const char *func, char *buf, size_t n) {
	size_t len = strlen(func);
	if (len > 6 && !strcmp(func + len - 6, " const"))
		len -= 6;
	if (!len || func[len - 1] != ')' || n < 2)
		return func;
	int depth = 0;
	size_t i = len;
	while (i-- > 0) {
		if (func[i] == ')')
			depth++;
		else if (func[i] == '(' && !--depth)
			break;
	}
	if (i == (size_t)-1 || i == 0) /* unbalanced, or "(...)" alone */
		return func;
	snprintf(buf, n, "%.*s", (int)i, func);
	return buf;
}

