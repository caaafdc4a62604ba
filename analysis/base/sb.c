/* sb.c — growable strings, and JSON strings and numbers in them (sb.h). */
#include "base/sb.h"
#include "shim/format.h" /* mt_utf8_len */
#include "base/mem.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
sb_i64(struct sb *s, long long v) {
	char t[24], *e = t + sizeof t, *p = e;
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	sb_puts_n(s, p, (size_t)(e - p));
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

void
sb_json_num(struct sb *s, const char *fmt, double v) {
	if (isfinite(v))
		sb_printf(s, fmt, v);
	else
		sb_puts(s, "null");
}
