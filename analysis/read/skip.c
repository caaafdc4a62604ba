/* skip.c — which lines a summary reads (reader.h: summary_keep), told by
 * their first bytes as the shim writes them, and a snapshot's call-site
 * rows cut out before the JSON parser sees them (summary.c, load.c). */
#include "read/reader.h"
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

