/* keyix.c — an open-addressing index of byte strings (keyix.h). */
#include "base/keyix.h"
#include "base/mem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
