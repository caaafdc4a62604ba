/* util.c — helpers for the analysis command (util.h). */
#include "base/util.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void *
xmalloc(size_t n) {
	void *p = malloc(n ? n : 1);
	if (!p)
		die(EXIT_BAD_INPUT, "out of memory (%zu bytes)", n);
	return p;
}

void *
xcalloc(size_t n, size_t size) {
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		die(EXIT_BAD_INPUT, "out of memory (%zu x %zu bytes)", n, size);
	return p;
}

void *
xrealloc(void *p, size_t n) {
	p = realloc(p, n ? n : 1);
	if (!p)
		die(EXIT_BAD_INPUT, "out of memory (%zu bytes)", n);
	return p;
}

void *
xgrow(void *p, size_t need, size_t *cap, size_t elem) {
	if (need <= *cap)
		return p;
	size_t n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	*cap = n;
	return xrealloc(p, n * elem);
}

char *
xstrdup(const char *s) {
	return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n) {
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

#ifdef MT_FUZZ
jmp_buf *mt_fuzz_jmp;
#endif

void
die(int code, const char *fmt, ...) {
	va_list ap;
	fflush(stdout);
	fputs("memtally: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
#ifdef MT_FUZZ
	if (mt_fuzz_jmp) /* the fuzz harness takes the error back (test/fuzz) */
		longjmp(*mt_fuzz_jmp, code + 1);
#endif
	exit(code);
}

void
warnx(const char *fmt, ...) {
	va_list ap;
	fputs("memtally: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
sb_grow(struct sb *s, size_t n) {
	if (s->len + n + 1 <= s->cap)
		return;
	size_t cap = s->cap ? s->cap * 2 : 256;
	while (cap < s->len + n + 1)
		cap *= 2;
	s->p = xrealloc(s->p, cap);
	s->cap = cap;
}

void
sb_putc(struct sb *s, char c) {
	sb_grow(s, 1);
	s->p[s->len++] = c;
	s->p[s->len] = 0;
}

void
sb_puts(struct sb *s, const char *str) {
	size_t n = strlen(str);
	sb_grow(s, n);
	memcpy(s->p + s->len, str, n + 1);
	s->len += n;
}

void
sb_puts_n(struct sb *s, const char *p, size_t n) {
	sb_grow(s, n);
	memcpy(s->p + s->len, p, n);
	s->len += n;
	s->p[s->len] = 0;
}

void
sb_printf(struct sb *s, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	char probe[1];
	int n = vsnprintf(probe, sizeof probe, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_grow(s, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(s->p + s->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	s->len += (size_t)n;
}

/* Every string the command writes as JSON: escaped, and valid UTF-8 (a
 * byte that is not part of a character, from a file or a symbol table,
 * becomes U+FFFD, as the shim's writer does). */
void
sb_json_str(struct sb *s, const char *str) {
	sb_putc(s, '"');
	const unsigned char *p = (const unsigned char *)(str ? str : "");
	size_t n = strlen((const char *)p);
	for (size_t i = 0; i < n;) {
		unsigned char c = p[i];
		if (c == '"' || c == '\\') {
			sb_putc(s, '\\');
			sb_putc(s, (char)c);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			sb_printf(s, "\\u%04x", c);
			i++;
		} else if (c < 0x80) {
			sb_putc(s, (char)c);
			i++;
		} else {
			size_t k = mt_utf8_len(p + i, n - i);
			if (k)
				sb_puts_n(s, (const char *)p + i, k), i += k;
			else
				sb_puts(s, "\\ufffd"), i++;
		}
	}
	sb_putc(s, '"');
}

void
sb_free(struct sb *s) {
	free(s->p);
	s->p = NULL;
	s->len = s->cap = 0;
}

/* Could p[0..avail) be the start of a UTF-8 character cut by the end of
 * a buffer?  (The bytes there are right so far; more would complete it.) */
static int
utf8_cut(const unsigned char *p, size_t avail) {
	unsigned c = p[0];
	size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
		   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (!len || avail >= len)
		return 0;
	for (size_t k = 1; k < avail; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if (avail >= 2 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
			   (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
		return 0;
	return 1;
}

void
text_escape(struct textesc *t, const char *buf, size_t n, struct sb *out) {
	/* the bytes a previous call held back come first */
	unsigned char tmp[8];
	size_t i = 0;
	while (t->n && i < n) {
		memcpy(tmp, t->carry, (size_t)t->n);
		size_t have = (size_t)t->n, take = 0;
		while (have < 4 && i + take < n)
			tmp[have++] = (unsigned char)buf[i + take++];
		size_t k = mt_utf8_len(tmp, have);
		if (k) { /* the character completed */
			sb_puts_n(out, (const char *)tmp, k);
			i += k - (size_t)t->n;
			t->n = 0;
		} else if (utf8_cut(tmp, have)) { /* still short: the input ran out */
			memcpy(t->carry, tmp, have);
			t->n = (int)have;
			return;
		} else { /* not UTF-8: its first byte escaped, the rest again */
			sb_printf(out, "\\x%02x", tmp[0]);
			memmove(t->carry, t->carry + 1, (size_t)--t->n);
		}
	}
	const unsigned char *p = (const unsigned char *)buf;
	while (i < n) {
		unsigned char c = p[i];
		if (c < 0x80) {
			if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
				sb_printf(out, "\\x%02x", c);
			else
				sb_putc(out, (char)c);
			i++;
			continue;
		}
		size_t k = mt_utf8_len(p + i, n - i);
		if (k) {
			sb_puts_n(out, (const char *)p + i, k);
			i += k;
		} else if (utf8_cut(p + i, n - i)) {
			memcpy(t->carry, p + i, n - i);
			t->n = (int)(n - i);
			return;
		} else {
			sb_printf(out, "\\x%02x", c);
			i++;
		}
	}
}

static const char *
human_mag(const char *sign, uint64_t bytes, char *buf) {
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	int i = 0;
	while (v >= 1024 && i < 6) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, 16, "%s%.0f B", sign, v);
	else
		snprintf(buf, 16, "%s%.*f %s", sign, v < 10 ? 2 : v < 100 ? 1 : 0, v, u[i]);
	return buf;
}

const char *
human(int64_t bytes, char *buf) {
	/* -INT64_MIN overflows: the magnitude as a uint64 */
	return human_mag(bytes < 0 ? "-" : "", bytes < 0 ? 0 - (uint64_t)bytes : (uint64_t)bytes, buf);
}

const char *
human_u64(uint64_t bytes, char *buf) {
	return human_mag("", bytes, buf);
}

const char *
human_ms(int64_t ms, char *buf) {
	const char *sign = ms < 0 ? "-" : "";
	unsigned long long m = ms < 0 ? 0 - (unsigned long long)ms : (unsigned long long)ms;
	char t[48];
	if (m < 1000)
		snprintf(t, sizeof t, "%s%llums", sign, m);
	else if (m < 60000)
		snprintf(t, sizeof t, "%s%.1fs", sign, (double)m / 1000);
	else if (m < 3600000)
		snprintf(t, sizeof t, "%s%llum%02llus", sign, m / 60000, m / 1000 % 60);
	else
		snprintf(t, sizeof t, "%s%lluh%02llum", sign, m / 3600000, m / 60000 % 60);
	t[15] = 0;
	memcpy(buf, t, 16);
	return buf;
}

static int
cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double
median(double *v, size_t n) {
	if (!n)
		return 0;
	xqsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void
xqsort(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
	if (n > 1)
		qsort(v, n, size, cmp);
}

int
write_all(int fd, const void *data, size_t len) {
	const char *p = data;
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, p + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		done += (size_t)w;
	}
	return 0;
}

void
write_output(const char *path, const void *data, size_t len) {
	/* "-", /dev/stdout and /dev/stderr are the streams; a path that is
	 * itself a FIFO or a device (/dev/null) is written as it is -- renaming
	 * over it would replace /dev/null with a file.  A link is never
	 * followed (a planted one is replaced, below). */
	int stream = !strcmp(path, "-") || !strcmp(path, "/dev/stdout") ? 1
		     : !strcmp(path, "/dev/stderr")                   ? 2
								      : -1;
	struct stat st;
	if (stream < 0 && !lstat(path, &st) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) &&
	    !S_ISDIR(st.st_mode)) {
		/* O_NONBLOCK: a FIFO without a reader is an error, not a hang */
		int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
		if (fd >= 0)
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		int err = fd < 0 ? errno : write_all(fd, data, len);
		if (fd >= 0 && close(fd) && !err)
			err = errno;
		if (err)
			die(EXIT_USAGE, "%s: %s", path, strerror(err));
		return;
	}
	if (stream > 0) {
		fflush(stdout);
		int err = write_all(stream, data, len);
		if (err)
			die(EXIT_USAGE, "%s: %s", path, strerror(err));
		return;
	}
	struct sb tmp = {0};
	sb_printf(&tmp, "%s.XXXXXX", path);
	int fd = mkstemp(tmp.p); /* O_EXCL in path's own directory */
	if (fd < 0)
		die(EXIT_USAGE, "%s: %s", path, strerror(errno));
	mode_t um = umask(0);
	umask(um);
	int err = fchmod(fd, 0640 & ~um) /* as the shim's files: no access for others */ ? errno : 0;
	if (!err)
		err = write_all(fd, data, len);
	if (close(fd) && !err)
		err = errno;
	if (!err && rename(tmp.p, path))
		err = errno;
	if (err) {
		unlink(tmp.p);
		die(EXIT_USAGE, "%s: %s", path, strerror(err));
	}
	sb_free(&tmp);
}

void
sb_json_num(struct sb *s, const char *fmt, double v) {
	if (isfinite(v))
		sb_printf(s, fmt, v);
	else
		sb_puts(s, "null");
}

int
term_width(void) {
	static int w = -1;
	if (w >= 0)
		return w;
	struct winsize ws;
	const char *c = getenv("COLUMNS");
	if (c && atoi(c) > 0)
		w = atoi(c);
	else if (isatty(1) && !ioctl(1, TIOCGWINSZ, &ws) && ws.ws_col > 0)
		w = ws.ws_col;
	else
		w = 0;
	return w;
}

const char *
rate_text(double per_hour, double per_step, int64_t window_ms, int say_window, char *buf, size_t n) {
	char a[16], t[16];
	if (!isnan(per_step))
		snprintf(buf, n, "%s/step", human((int64_t)llround(per_step), a));
	else if (isnan(per_hour))
		snprintf(buf, n, "?");
	else if (window_ms >= 3600000)
		snprintf(buf, n, "%s/h", human((int64_t)per_hour, a));
	else
		snprintf(buf, n, "%s%s%s", human((int64_t)(per_hour * (double)window_ms / 3.6e6), a),
			 say_window ? " in " : "", say_window ? human_ms(window_ms, t) : "");
	return buf;
}

static uint64_t
hash_bytes(const char *p, size_t n) {
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h;
}

uint64_t *
keyix_slot(struct keyix *x, const char *k, size_t n, int *fresh) {
	if ((x->n + 1) * 2 > x->cap) {
		struct keyix g = {0};
		g.cap = x->cap ? x->cap * 2 : 1024;
		g.key = xcalloc(g.cap, sizeof *g.key);
		g.len = xcalloc(g.cap, sizeof *g.len);
		g.val = xcalloc(g.cap, sizeof *g.val);
		for (size_t i = 0; i < x->cap; i++)
			if (x->key[i]) {
				size_t j = (size_t)hash_bytes(x->key[i], x->len[i]) & (g.cap - 1);
				while (g.key[j])
					j = (j + 1) & (g.cap - 1);
				g.key[j] = x->key[i], g.len[j] = x->len[i], g.val[j] = x->val[i];
			}
		g.n = x->n;
		free(x->key), free(x->len), free(x->val);
		*x = g;
	}
	size_t j = (size_t)hash_bytes(k, n) & (x->cap - 1);
	while (x->key[j] && !(x->len[j] == n && !memcmp(x->key[j], k, n)))
		j = (j + 1) & (x->cap - 1);
	*fresh = !x->key[j];
	if (*fresh) {
		x->key[j] = xmalloc(n + 1);
		memcpy(x->key[j], k, n);
		x->key[j][n] = 0;
		x->len[j] = n;
		x->n++;
	}
	return &x->val[j];
}

void
keyix_free(struct keyix *x) {
	for (size_t i = 0; i < x->cap; i++)
		free(x->key[i]);
	free(x->key), free(x->len), free(x->val);
	memset(x, 0, sizeof *x);
}
