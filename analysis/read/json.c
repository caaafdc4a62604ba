/* json.c — the in-place JSON parser (json.h).  Hand-written because it is
 * the analysis hot path: a snapshot line is mostly keys and integers, and
 * parsing them without copies or per-value allocation is what lets the
 * reader stream hundreds of MB/s (test/bench: analysis throughput). */
#include "read/json.h"
#include "base/util.h"
#include <stdlib.h>
#include <string.h>

struct p {
	struct jdoc *d;
	char *s, *end;
	const char *err;
	int depth;
};

static uint32_t
node(struct p *p) {
	struct jdoc *d = p->d;
	if (d->n >= d->cap) {
		d->cap = d->cap ? d->cap * 2 : 1024;
		d->v = xrealloc(d->v, (size_t)d->cap * sizeof *d->v);
	}
	uint32_t i = d->n++;
	struct jv *v = &d->v[i];
	v->key = NULL;
	v->keylen = v->next = v->first = v->len = 0;
	v->is_int = 0;
	v->is_u64 = 0;
	return i;
}

static inline void
ws(struct p *p) {
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n'))
		p->s++;
}

static void
put_utf8(char **o, uint32_t c) {
	char *q = *o;
	if (c < 0x80) {
		*q++ = (char)c;
	} else if (c < 0x800) {
		*q++ = (char)(0xc0 | c >> 6);
		*q++ = (char)(0x80 | (c & 63));
	} else if (c < 0x10000) {
		*q++ = (char)(0xe0 | c >> 12);
		*q++ = (char)(0x80 | (c >> 6 & 63));
		*q++ = (char)(0x80 | (c & 63));
	} else {
		*q++ = (char)(0xf0 | c >> 18);
		*q++ = (char)(0x80 | (c >> 12 & 63));
		*q++ = (char)(0x80 | (c >> 6 & 63));
		*q++ = (char)(0x80 | (c & 63));
	}
	*o = q;
}

static int
hex4(const char *s, uint32_t *out) {
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			v |= (uint32_t)((c | 0x20) - 'a' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Parse a string at p->s (after the quote); unescape in place. */
static const char *
string(struct p *p, uint32_t *len) {
	char *start = p->s, *o = p->s;
	for (;;) {
		if (p->s >= p->end)
			return p->err = "unterminated string", NULL;
		char c = *p->s;
		if (c == '"')
			break;
		if ((unsigned char)c < 0x20)
			return p->err = "control character in string", NULL;
		if (c != '\\') {
			*o++ = c;
			p->s++;
			continue;
		}
		if (p->s + 1 >= p->end)
			return p->err = "unterminated string", NULL;
		char e = p->s[1];
		p->s += 2;
		switch (e) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			uint32_t c1, c2;
			if (p->end - p->s < 4 || hex4(p->s, &c1))
				return p->err = "bad \\u escape", NULL;
			p->s += 4;
			if (c1 >= 0xd800 && c1 < 0xdc00 && p->end - p->s >= 6 &&
			    p->s[0] == '\\' && p->s[1] == 'u' && !hex4(p->s + 2, &c2) &&
			    c2 >= 0xdc00 && c2 < 0xe000) {
				c1 = 0x10000 + ((c1 - 0xd800) << 10) + (c2 - 0xdc00);
				p->s += 6;
			}
			if (!c1 || (c1 >= 0xd800 && c1 < 0xe000))
				c1 = 0xfffd; /* NUL-free, and no lone surrogate (not UTF-8) */
			put_utf8(&o, c1);
			break;
		}
		default: return p->err = "bad escape in string", NULL;
		}
	}
	p->s++; /* closing quote */
	*len = (uint32_t)(o - start);
	*o = 0; /* o <= the closing quote's position: safe to overwrite */
	return start;
}

static int
number(struct p *p, struct jv *v) {
	char *s = p->s;
	int neg = 0;
	if (*s == '-')
		neg = 1, s++;
	if (s >= p->end || *s < '0' || *s > '9')
		return p->err = "bad number", -1;
	uint64_t u = 0;
	int over = 0;
	char *digits = s;
	while (s < p->end && *s >= '0' && *s <= '9') {
		unsigned dg = (unsigned)(*s++ - '0');
		if (u > UINT64_MAX / 10 || (u == UINT64_MAX / 10 && dg > UINT64_MAX % 10))
			over = 1;
		u = u * 10 + dg;
	}
	if (s - digits > 1 && *digits == '0')
		return p->err = "bad number (leading zero)", -1;
	int frac = s < p->end && (*s == '.' || *s == 'e' || *s == 'E');
	if (!frac && !over && u <= (uint64_t)INT64_MAX + (uint64_t)neg) {
		v->is_int = 1;
		v->i = neg ? (int64_t)(0 - u) : (int64_t)u;
		v->d = (double)v->i;
		p->s = s;
		return 0;
	}
	if (!frac && !over && !neg) { /* above INT64_MAX: a uint64 (a request of SIZE_MAX) */
		v->is_u64 = 1;
		v->i = (int64_t)u; /* its bits */
		v->d = (double)u;
		p->s = s;
		return 0;
	}
	char save = *p->end; /* strtod needs a terminator within our bytes */
	*p->end = 0;
	char *e;
	v->d = strtod(p->s, &e);
	*p->end = save;
	if (e == p->s)
		return p->err = "bad number", -1;
	v->i = v->d >= 9.2e18 ? INT64_MAX : v->d <= -9.2e18 ? INT64_MIN : (int64_t)v->d;
	p->s = e;
	return 0;
}

static uint32_t value(struct p *p);

static uint32_t
container(struct p *p, int obj) {
	uint32_t self = node(p);
	p->d->v[self].type = obj ? J_OBJ : J_ARR;
	if (++p->depth > 64)
		return p->err = "nesting deeper than 64 levels", 0;
	p->s++;
	ws(p);
	uint32_t prev = 0, count = 0;
	if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
		p->s++;
		p->depth--;
		return self;
	}
	for (;;) {
		const char *key = NULL;
		uint32_t keylen = 0;
		ws(p);
		if (obj) {
			if (p->s >= p->end || *p->s != '"')
				return p->err = "expected a key", 0;
			p->s++;
			if (!(key = string(p, &keylen)))
				return 0;
			ws(p);
			if (p->s >= p->end || *p->s != ':')
				return p->err = "expected ':'", 0;
			p->s++;
		}
		uint32_t c = value(p);
		if (!c)
			return 0;
		p->d->v[c].key = key;
		p->d->v[c].keylen = keylen;
		if (prev)
			p->d->v[prev].next = c;
		else
			p->d->v[self].first = c;
		prev = c;
		count++;
		ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
			p->s++;
			break;
		}
		return p->err = obj ? "expected ',' or '}'" : "expected ',' or ']'", 0;
	}
	p->d->v[self].len = count;
	p->depth--;
	return self;
}

static uint32_t
value(struct p *p) {
	ws(p);
	if (p->s >= p->end)
		return p->err = "unexpected end of line", 0;
	char c = *p->s;
	if (c == '{' || c == '[')
		return container(p, c == '{');
	uint32_t i = node(p);
	struct jv *v = &p->d->v[i];
	if (c == '"') {
		p->s++;
		v->type = J_STR;
		const char *s = string(p, &v->len);
		v = &p->d->v[i];
		if (!s)
			return 0;
		v->s = s;
		return i;
	}
	if (c == '-' || (c >= '0' && c <= '9')) {
		v->type = J_NUM;
		return number(p, v) ? 0 : i;
	}
	static const struct { const char *w; size_t n; uint8_t t; } lit[] = {
		{"null", 4, J_NULL}, {"true", 4, J_TRUE}, {"false", 5, J_FALSE}};
	for (int k = 0; k < 3; k++) {
		if ((size_t)(p->end - p->s) >= lit[k].n && !memcmp(p->s, lit[k].w, lit[k].n)) {
			v->type = lit[k].t;
			p->s += lit[k].n;
			return i;
		}
	}
	return p->err = "unexpected character", 0;
}

struct jv *
json_parse(struct jdoc *d, char *s, size_t len, const char **err, size_t *col) {
	struct p p = {d, s, s + len, NULL, 0};
	d->n = 1; /* index 0 means "none" */
	uint32_t root = value(&p);
	if (root) {
		ws(&p);
		if (p.s != p.end) {
			p.err = "trailing characters after the value";
			root = 0;
		}
	}
	if (!root) {
		*err = p.err ? p.err : "parse error";
		*col = (size_t)(p.s - s);
		return NULL;
	}
	return &d->v[root];
}

void
json_free(struct jdoc *d) {
	free(d->v);
	d->v = NULL;
	d->n = d->cap = 0;
}

struct jv *
json_child(struct jdoc *d, struct jv *v) {
	return v && v->first ? &d->v[v->first] : NULL;
}

struct jv *
json_next(struct jdoc *d, struct jv *v) {
	return v && v->next ? &d->v[v->next] : NULL;
}

struct jv *
json_get(struct jdoc *d, struct jv *obj, const char *key) {
	if (!obj || obj->type != J_OBJ)
		return NULL;
	size_t n = strlen(key);
	for (struct jv *c = json_child(d, obj); c; c = json_next(d, c))
		if (c->keylen == n && !memcmp(c->key, key, n))
			return c;
	return NULL;
}

int64_t
json_int(struct jdoc *d, struct jv *obj, const char *key, int64_t def) {
	struct jv *v = json_get(d, obj, key);
	return v && v->type == J_NUM ? v->i : def;
}

double
json_num(struct jdoc *d, struct jv *obj, const char *key, double def) {
	struct jv *v = json_get(d, obj, key);
	return v && v->type == J_NUM ? v->d : def;
}

const char *
json_str(struct jdoc *d, struct jv *obj, const char *key) {
	struct jv *v = json_get(d, obj, key);
	return v && v->type == J_STR ? v->s : NULL;
}

int
json_u64(const struct jv *v, uint64_t *out) {
	if (!v || v->type != J_NUM || !(v->is_u64 || (v->is_int && v->i >= 0)))
		return 0;
	*out = (uint64_t)v->i;
	return 1;
}

int
json_hex(const struct jv *v, uint64_t *out) {
	if (!v || v->type != J_STR || v->len < 3 || v->s[0] != '0' || (v->s[1] | 0x20) != 'x')
		return 0;
	uint64_t x = 0;
	for (uint32_t i = 2; i < v->len; i++) {
		char c = v->s[i];
		if (i >= 18)
			return 0;
		x <<= 4;
		if (c >= '0' && c <= '9')
			x |= (uint64_t)(c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			x |= (uint64_t)((c | 0x20) - 'a' + 10);
		else
			return 0;
	}
	*out = x;
	return 1;
}
