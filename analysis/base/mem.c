/* mem.c — allocation that dies on failure, errors with exit codes (mem.h). */
#include "base/mem.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MT_FUZZ
jmp_buf *mt_fuzz_jmp;
#endif

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

void
xqsort(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
	if (n > 1)
		qsort(v, n, size, cmp);
}
