/* skip.c — which lines a summary reads (reader.h: summary_keep), told by
 * their first bytes as the shim writes them, and a snapshot's call-site
 * rows cut out before the JSON parser sees them (summary.c, load.c). */
#include "read/reader.h"
#include "base/mem.h"
#include <stdlib.h>
#include <string.h>

#define PFX_TYPE "{\"" MT_F_TYPE "\":\""

int
summary_keep(char *p, size_t *len) {
	size_t n = *len, k = sizeof PFX_TYPE - 1;
	if (n < k || memcmp(p, PFX_TYPE, k))
		return 1; /* not as the shim writes it: the parser decides */
	const char *t = p + k;
	size_t left = n - k;
#define IS(s) (left > sizeof(s) && !memcmp(t, s "\"", sizeof(s)))
	if (IS(MT_R_HEADER))
		return 1;
	if (!IS(MT_R_SNAPSHOT))
		return !(IS(MT_R_STACK) || IS(MT_R_PYFRAME) || IS(MT_R_PYSTACK) || IS(MT_R_MAPS) ||
			 IS(MT_R_PYTHON));
#undef IS
	/* a snapshot: cut `"callsites":[...]` down to `"callsites":[]` */
	static const char key[] = "\"" MT_F_CALLSITES "\":[";
	char *a = memmem(p, n, key, sizeof key - 1);
	if (!a)
		return 1;
	char *q = a + sizeof key - 1, *end = p + n;
	/* The rows hold numbers and kind names only, and the shim's line
	 * goes on with its "shim" object: found at memmem's speed. */
	static const char after[] = "],\"" MT_F_SHIM "\":{";
	char *sh = memmem(q, (size_t)(end - q), after, sizeof after - 1);
	if (sh) {
		memmove(q, sh, (size_t)(end - sh));
		*len = n - (size_t)(sh - q);
		return 1;
	}
	int depth = 1; /* else bracket by bracket */
	while (q < end && depth) {
		char ch = *q++;
		if (ch == '"') { /* a string: to its closing quote */
			while (q < end && *q != '"')
				q += *q == '\\' ? 2 : 1;
			q++;
		} else {
			depth += (ch == '[') - (ch == ']');
		}
	}
	if (depth || q > end)
		return 1; /* cut short: the parser says so */
	char *from = q - 1; /* the closing ']' */
	char *to = a + sizeof key - 1;
	memmove(to, from, (size_t)(end - from));
	*len = n - (size_t)(from - to);
	return 1;
}

/* --- ids defined twice (summary_seen) --- */

struct seen {
	struct seen_slot {
		uint64_t key; /* id << 2 | record kind (1..3); 0: empty */
		uint64_t hash;
	} *v;
	size_t cap, n; /* cap: a power of two */
};

static uint64_t
line_hash(const unsigned char *p, size_t n) {
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (; n >= 8; p += 8, n -= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	for (; n; p++, n--)
		h = (h ^ *p) * 0x100000001b3ull;
	return h ^ h >> 29;
}

static struct seen_slot *
seen_slot(struct seen *s, uint64_t key) {
	size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (s->cap - 1);
	while (s->v[i].key && s->v[i].key != key)
		i = (i + 1) & (s->cap - 1);
	return &s->v[i];
}

void
summary_seen(struct ctx *c, const char *p, size_t len) {
	static const struct {
		const char *pfx, *what;
	} kinds[] = {
		{PFX_TYPE MT_R_STACK "\",\"" MT_F_ID "\":",
		 "stack %lld is defined a second time, with other frames (a stack id names one stack)"},
		{PFX_TYPE MT_R_PYFRAME "\",\"" MT_F_ID "\":", "pyframe %lld is defined a second time, as another frame"},
		{PFX_TYPE MT_R_PYSTACK "\",\"" MT_F_ID "\":", "pystack %lld is defined a second time, with other frames"},
	};
	unsigned k = 0;
	size_t n = 0;
	for (; k < 3; k++) {
		n = strlen(kinds[k].pfx);
		if (len > n && !memcmp(p, kinds[k].pfx, n))
			break;
	}
	if (k == 3)
		return;
	uint64_t id = 0;
	size_t i = n;
	for (; i < len && i < n + 10 && p[i] >= '0' && p[i] <= '9'; i++)
		id = id * 10 + (uint64_t)(p[i] - '0');
	if (i == n || id < 1 || id > INT32_MAX)
		return; /* not as the shim writes it: not checked */
	struct seen *s = c->seen;
	if (!s) {
		s = c->seen = xcalloc(1, sizeof *s);
		s->cap = 1024;
		s->v = xcalloc(s->cap, sizeof *s->v);
	}
	if (2 * (s->n + 1) > s->cap) { /* at most half full */
		struct seen t = {xcalloc(2 * s->cap, sizeof *s->v), 2 * s->cap, s->n};
		for (size_t j = 0; j < s->cap; j++)
			if (s->v[j].key)
				*seen_slot(&t, s->v[j].key) = s->v[j];
		free(s->v);
		*s = t;
	}
	uint64_t key = id << 2 | (k + 1), h = line_hash((const unsigned char *)p + i, len - i);
	struct seen_slot *e = seen_slot(s, key);
	if (!e->key) {
		e->key = key;
		e->hash = h;
		s->n++;
	} else if (e->hash != h) {
		bad(c, kinds[k].what, (long long)id);
	}
}

void
summary_seen_free(struct ctx *c) {
	if (c->seen)
		free(c->seen->v);
	free(c->seen);
	c->seen = NULL;
}
