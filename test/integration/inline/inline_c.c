/* Inlined callers (test_inline): remember() inlined into batch_a() and
 * batch_b(), both inlined into main; leaf() < mid() < outer() inlined
 * into work(), with a lexical block between them.  Built by the test at
 * -O2 and -O3. */
#include <stdio.h>
#include <stdlib.h>

void *keep[256];
int nkeep;

static inline void remember(size_t n) {
	keep[nkeep++] = malloc(n); /* SITE_REMEMBER */
}
static void batch_a(void) {
	for (int i = 0; i < 8; i++)
		remember(1000); /* CALL_A */
}
static void batch_b(void) {
	for (int i = 0; i < 8; i++)
		remember(3000); /* CALL_B */
}
static inline void *leaf(size_t n) {
	char *p = malloc(n); /* SITE_LEAF */
	if (p)
		p[0] = 1;
	return p;
}
static inline void mid(int k) {
	for (int i = 0; i < k; i++) {
		size_t n = 500 + (size_t)i;
		keep[nkeep++] = leaf(n);
	}
}
static inline void outer(int k) {
	mid(k);
}
__attribute__((noinline)) void work(int k) {
	outer(k);
}
int main(int argc, char **argv) {
	(void)argv;
	batch_a();
	batch_b();
	work(argc + 4);
	printf("%d\n", nkeep);
	return 0;
}
