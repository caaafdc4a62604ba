/* userline.c — rows led by the user's line (sites.h): memtally's own
 * Python frames left out of every stack, the innermost frame of the
 * program's own code, and that line's source text.
 *
 * In a Python process a row is named by the innermost frame of the
 * program's own code, with its source text where the file is readable,
 * then the library frame the allocation came through:
 *
 *   train.py:29  out = model(x)   via conv.py:459 Conv2d._conv_forward
 *
 * Sites are grouped by the part before SITE_VIA (site_user_key): one
 * user line is one row however many library paths it took; the "via"
 * part is the row's largest site's (site_label). */
#include "answer/sites.h"
#include "base/util.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXF 160
#define SRC_MAX (16 << 20) /* larger files are not read for a line */
#define SRC_COLS 60        /* a line's text, cut to this */

/* ---- the user's frame ---- */

/* Code torch.compile wrote (TorchInductor's output code, doc/python.md
 * "torch.compile"): a file under its default cache folder
 * (/tmp/torchinductor_USER), or one whose first line is the header it
 * writes ("# AOT ID: "), wherever TORCHINDUCTOR_CACHE_DIR puts it.  Each
 * file's answer is kept. */
static int
py_generated(const char *path) {
	static struct keyix ix; /* path -> 1 + the answer */
	if (strstr(path, "/torchinductor_"))
		return 1;
	int fresh;
	uint64_t *slot = keyix_slot(&ix, path, strlen(path), &fresh);
	if (fresh) {
		static const char head[] = "# AOT ID: ";
		char b[sizeof head] = {0};
		FILE *in = fopen(path, "rb");
		size_t got = in ? fread(b, 1, sizeof head - 1, in) : 0;
		if (in)
			fclose(in);
		*slot = 1 + (got == sizeof head - 1 && !memcmp(b, head, got));
	}
	return *slot == 2;
}

int
site_py_user(const struct frame *fr) {
	const char *f = fr->file;
	return fr->python == 1 && f && f[0] != '<' && !strstr(f, "/site-packages/") &&
	       !strstr(f, "/dist-packages/") && !strstr(f, "/lib/python") &&
	       !site_own_frame(fr) && !py_generated(f);
}

/* ---- source text, a cache per file ---- */

struct src {
	char *text;     /* the file, NULL when unreadable */
	size_t len;
	size_t *line;   /* offsets of lines 1..n */
	int n;
};

static void
src_read(struct src *s, const char *path) {
	struct stat st;
	FILE *in = stat(path, &st) || !S_ISREG(st.st_mode) || st.st_size > SRC_MAX
			   ? NULL
			   : fopen(path, "rb");
	if (!in)
		return;
	s->text = xmalloc((size_t)st.st_size + 1);
	s->len = fread(s->text, 1, (size_t)st.st_size, in);
	s->text[s->len] = 0;
	fclose(in);
	size_t cap = 0;
	for (size_t o = 0; o < s->len;) {
		s->line = xgrow(s->line, (size_t)s->n + 1, &cap, sizeof *s->line);
		s->line[s->n++] = o;
		const char *nl = memchr(s->text + o, '\n', s->len - o);
		o = nl ? (size_t)(nl - s->text) + 1 : s->len;
	}
}

/* The end of a Python line's code: its "# comment" cut (a '#' outside
 * quotes), so a row reads as the code alone. */
static const char *
code_end(const char *p, const char *e) {
	char q = 0;
	for (; p < e && *p != '\n'; p++) {
		if (q && *p == '\\' && p + 1 < e)
			p++;
		else if (q && *p == q)
			q = 0;
		else if (!q && (*p == '\'' || *p == '"'))
			q = *p;
		else if (!q && *p == '#')
			break;
	}
	return p;
}

/* Line `line` of file `path`, stripped, its comment cut, runs of blanks
 * and control characters as one space, cut to SRC_COLS; "" when the file
 * or line cannot be read. */
const char *
site_src_line(const char *path, int line, char *buf, size_t n) {
	static struct keyix ix; /* path -> 1 + index into v */
	static struct src *v;
	static size_t nv, cap;
	int fresh;
	uint64_t *slot = keyix_slot(&ix, path, strlen(path), &fresh);
	if (fresh) {
		v = xgrow(v, nv + 1, &cap, sizeof *v);
		memset(&v[nv], 0, sizeof v[nv]);
		src_read(&v[nv], path);
		*slot = ++nv;
	}
	const struct src *s = &v[*slot - 1];
	buf[0] = 0;
	if (!s->text || line < 1 || line > s->n || n < 8)
		return buf;
	const char *p = s->text + s->line[line - 1];
	const char *e = code_end(p, s->text + s->len);
	size_t k = 0, room = n - 4 < SRC_COLS ? n - 4 : SRC_COLS;
	for (; p < e && k < room; p++) {
		int blank = (unsigned char)*p <= 0x20 || *p == 0x7f;
		if (!blank)
			buf[k++] = *p;
		else if (k && buf[k - 1] != ' ')
			buf[k++] = ' ';
	}
	if (k == room && p < e) {
		/* p is the first byte left out: inside a character, the kept
		 * part of it goes too (buf[k] was read here, a byte never
		 * written: the same file's row names were cut one character
		 * shorter on some runs) */
		if (((unsigned char)*p & 0xc0) == 0x80) {
			while (k && ((unsigned char)buf[k - 1] & 0xc0) == 0x80)
				k--;
			if (k)
				k--; /* the character's first byte */
		}
		memcpy(buf + k, "...", 3);
		k += 3;
	}
	while (k && (buf[k - 1] == ' ' || buf[k - 1] == '\r'))
		k--;
	buf[k] = 0;
	return buf;
}

/* ---- names ---- */

/* "train.py:29  out = model(x)", or "train.py:29 in train" when the
 * source cannot be read. */
static void
user_text(const struct frame *u, char *buf, size_t n) {
	char src[SRC_COLS + 8];
	site_src_line(u->file, u->line, src, sizeof src);
	if (src[0])
		snprintf(buf, n, "%s:%d  %s", site_base_name(u->file), u->line, src);
	else
		snprintf(buf, n, "%s:%d in %s", site_base_name(u->file), u->line,
			 u->func ? u->func : "?");
}

/* The index of the innermost user frame of a Python process's stack
 * named by its user line, else -1 (native files, --by site, C programs,
 * stacks of library code alone). */
static int
user_of(const struct mfile *f, const struct frame *fr, int nf) {
	if (f->native || f->by_site)
		return -1;
	for (int i = 0; i < nf; i++)
		if (site_py_user(&fr[i]))
			return i;
	return -1;
}

/* A stack's Python frames alone, memtally's dropped (what the user's
 * line depends on: no native frame symbolized). */
static int
py_frames(const struct mfile *f, uint32_t stack, struct frame *fr, int max) {
	const struct stack *st = stack && stack < f->nstacks ? &f->stacks[stack] : NULL;
	if (!st || st->py <= 0 || (size_t)st->py >= f->npystacks)
		return 0;
	const struct pystack *ps = &f->pystacks[st->py];
	int n = 0;
	for (int k = 0; k < ps->n && n < max; k++) {
		const struct pyframe *p = &f->pyframes[ps->frames[k]];
		fr[n++] = (struct frame){.func = p->func, .file = p->file, .line = p->line,
					 .module = "[python]", .status = SYM_OK, .python = 1};
	}
	return site_drop_own(fr, n);
}

int
site_user_key(const struct mfile *f, uint32_t stack, char *buf, size_t n) {
	if (f->native || f->by_site || !f->python)
		return 0;
	struct frame fr[MAXF];
	int nf = py_frames(f, stack, fr, MAXF);
	int u = user_of(f, fr, nf);
	if (u < 0)
		return 0;
	user_text(&fr[u], buf, n);
	return 1;
}

/* " via functional.py:1457 relu": the innermost Python frame when it is
 * not the user's own (the row's largest site's path). */
static void
via_text(const struct frame *fr, int nf, int u, struct sb *s) {
	int i = site_first_informative(fr, nf);
	if (i >= u || fr[i].python != 1 || !fr[i].file)
		return;
	char sf[512];
	sb_printf(s, "%s%s:%d %s", SITE_VIA, site_base_name(fr[i].file), fr[i].line,
		  fr[i].func ? site_short_func(fr[i].func, sf, sizeof sf) : "?");
}

int
site_user_name(const struct mfile *f, uint32_t stack, char *buf, size_t n) {
	if (f->native || f->by_site || !f->python)
		return 0;
	struct frame fr[MAXF];
	int nf = site_frames(f, stack, fr, MAXF);
	int u = user_of(f, fr, nf);
	if (u < 0)
		return 0;
	char key[512];
	user_text(&fr[u], key, sizeof key);
	struct sb s = {0};
	sb_puts(&s, key);
	via_text(fr, nf, u, &s);
	snprintf(buf, n, "%s", s.p);
	sb_free(&s);
	return 1;
}

char *
site_label(const struct mfile *f, char *name, uint32_t stack) {
	if (f->native || f->by_site || !f->python || strstr(name, SITE_VIA))
		return name;
	char full[1024], key[512];
	if (!site_user_name(f, stack, full, sizeof full) ||
	    !site_user_key(f, stack, key, sizeof key) || strcmp(key, name) ||
	    !strcmp(full, name))
		return name;
	free(name);
	return xstrdup(full);
}

size_t
site_key_len(const char *name) {
	const char *v = strstr(name, SITE_VIA);
	return v ? (size_t)(v - name) : strlen(name);
}

int
site_same_row(const char *a, const char *b) {
	size_t n = site_key_len(a);
	return n == site_key_len(b) && !memcmp(a, b, n);
}
