/* pickle.c — the protocol-2 writer (pickle.h).  A MARK is written lazily
 * before the first item of each batch, and the batch closed with
 * APPENDS/SETITEMS after 1000 items (a dict item is a key and a value) or
 * when the container closes.  Strings go through the memo (pk_str). */
#include "export/pickle.h"
#include <string.h>

static void
raw(struct pk *p, const void *s, size_t n) {
	for (size_t i = 0; i < n; i++)
		sb_putc(&p->out, ((const char *)s)[i]);
}

static void
op(struct pk *p, unsigned char c) {
	sb_putc(&p->out, (char)c);
}

/* Called before every value: counts it in the open container's batch. */
static void
item(struct pk *p) {
	if (!p->depth)
		return;
	int d = p->depth - 1;
	int per = p->kind[d] == 'd' ? 2000 : 1000; /* values: 1000 pairs */
	if (p->count[d] == per) {
		op(p, p->kind[d] == 'd' ? 'u' : 'e');
		p->count[d] = 0;
	}
	if (p->count[d] == 0)
		op(p, '(');
	p->count[d]++;
}

void
pk_begin(struct pk *p) {
	memset(p, 0, sizeof *p);
	op(p, 0x80);
	op(p, 2);
}

void
pk_end(struct pk *p) {
	op(p, '.');
}

static void
open_(struct pk *p, char kind) {
	item(p);
	op(p, kind == 'd' ? '}' : ']');
	if (p->depth >= 64)
		die(EXIT_BAD_INPUT, "pickle: nesting too deep");
	p->kind[p->depth] = kind;
	p->count[p->depth++] = 0;
}

void
pk_list(struct pk *p) {
	open_(p, 'l');
}

void
pk_dict(struct pk *p) {
	open_(p, 'd');
}

void
pk_close(struct pk *p) {
	int d = --p->depth;
	if (p->count[d])
		op(p, p->kind[d] == 'd' ? 'u' : 'e');
}

static void
binunicode(struct pk *p, const char *str, size_t len) {
	item(p);
	uint32_t n = (uint32_t)len;
	op(p, 'X');
	unsigned char le[4] = {(unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
			       (unsigned char)(n >> 24)};
	raw(p, le, 4);
	raw(p, str, n);
}

uint32_t
pk_put(struct pk *p) {
	uint32_t ix = p->nmemo++;
	if (ix < 256) {
		op(p, 'q'); /* BINPUT */
		op(p, (unsigned char)ix);
	} else {
		op(p, 'r'); /* LONG_BINPUT */
		for (int i = 0; i < 4; i++)
			op(p, (unsigned char)(ix >> (8 * i)));
	}
	return ix;
}

void
pk_get(struct pk *p, uint32_t ix) {
	item(p);
	if (ix < 256) {
		op(p, 'h'); /* BINGET */
		op(p, (unsigned char)ix);
	} else {
		op(p, 'j'); /* LONG_BINGET */
		for (int i = 0; i < 4; i++)
			op(p, (unsigned char)(ix >> (8 * i)));
	}
}

void
pk_free(struct pk *p) {
	sb_free(&p->out);
	keyix_free(&p->strs);
}

/* A string once; after that from the memo (a key of every trace entry
 * costs 2 to 5 bytes, not 9 to 20). */
static void
memo_str(struct pk *p, const char *str, size_t len) {
	int fresh;
	uint64_t *ix = keyix_slot(&p->strs, str, len, &fresh);
	if (!fresh) {
		pk_get(p, (uint32_t)(*ix - 1));
		return;
	}
	binunicode(p, str, len);
	*ix = (uint64_t)pk_put(p) + 1;
}

void
pk_str(struct pk *p, const char *s) {
	/* BINUNICODE must be UTF-8 (Python's pickle refused the whole file
	 * over one bad byte in a name): bytes that are not become U+FFFD */
	const char *str = s ? s : "";
	const unsigned char *c = (const unsigned char *)str;
	size_t len;
	while (*c && (len = mt_utf8_len(c, SIZE_MAX)))
		c += len;
	if (!*c) { /* all well-formed: as it is */
		memo_str(p, str, strlen(str));
		return;
	}
	struct sb u = {0};
	for (c = (const unsigned char *)str; *c;) {
		len = mt_utf8_len(c, SIZE_MAX);
		if (len) {
			for (size_t k = 0; k < len; k++)
				sb_putc(&u, (char)c[k]);
			c += len;
		} else {
			sb_puts(&u, "\xef\xbf\xbd");
			c++;
		}
	}
	memo_str(p, u.p, u.len);
	sb_free(&u);
}

static void
int_body(struct pk *p, int64_t v) {
	if (v >= 0 && v < 256) {
		op(p, 'K');
		op(p, (unsigned char)v);
	} else if (v >= 0 && v < 65536) {
		op(p, 'M');
		op(p, (unsigned char)v);
		op(p, (unsigned char)(v >> 8));
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		uint32_t u = (uint32_t)(int32_t)v;
		op(p, 'J');
		for (int i = 0; i < 4; i++)
			op(p, (unsigned char)(u >> (8 * i)));
	} else {
		uint64_t u = (uint64_t)v;
		op(p, 0x8a);
		op(p, 8);
		for (int i = 0; i < 8; i++)
			op(p, (unsigned char)(u >> (8 * i)));
	}
}

void
pk_int(struct pk *p, int64_t v) {
	item(p);
	int_body(p, v);
}

void
pk_uint(struct pk *p, uint64_t v) {
	item(p);
	if (v <= INT64_MAX) {
		int_body(p, (int64_t)v);
		return;
	}
	op(p, 0x8a); /* LONG1, 9 bytes: a positive value above INT64_MAX */
	op(p, 9);
	for (int i = 0; i < 8; i++)
		op(p, (unsigned char)(v >> (8 * i)));
	op(p, 0);
}

void
pk_none(struct pk *p) {
	item(p);
	op(p, 'N');
}

void
pk_bool(struct pk *p, int v) {
	item(p);
	op(p, v ? 0x88 : 0x89);
}

void
pk_pair(struct pk *p, int64_t a, int64_t b) {
	item(p);
	int_body(p, a);
	int_body(p, b);
	op(p, 0x86);
}
