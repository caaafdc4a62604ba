/* prog_known — allocations of known size from known functions; the test
 * (test_known.py) checks the exit snapshot against these exact figures. */

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NOINLINE __attribute__((noinline))
static void *keep[4096];
static int nkeep;

NOINLINE void alloc_pages(void) {              /* 1000 x 4096 B live */
	for (int i = 0; i < 1000; i++)
		keep[nkeep++] = malloc(4096);
}
NOINLINE void *map_one(size_t n) {
	return mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
NOINLINE void map_megs(void) {                 /* 300 x 1 MiB live */
	for (int i = 0; i < 300; i++)
		if (map_one(1 << 20) == MAP_FAILED)
			exit(3);
}
NOINLINE void map_and_unmap(void) {            /* 50 x 64 KiB, all unmapped */
	for (int i = 0; i < 50; i++) {
		void *p = mmap(NULL, 65536, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(p, 65536);
	}
}
NOINLINE void map_trim(void) {                 /* 4 pages, tail 2 unmapped: 8192 live */
	char *p = mmap(NULL, 16384, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(p + 8192, 8192);
}
NOINLINE void map_grow(void) {                 /* 1 page grown to 3 by mremap: 12288 live */
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p = mremap(p, 4096, 12288, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		exit(4);
}
NOINLINE void realloc_chain(void) {            /* 10 chains 16 -> 32 -> ... -> 8192 */
	for (int i = 0; i < 10; i++) {
		char *p = NULL;
		for (size_t n = 16; n <= 8192; n *= 2)
			p = realloc(p, n);
		keep[nkeep++] = p;
	}
}
NOINLINE void aligned(void) {                  /* 10 x 1000 B at 4096 alignment */
	for (int i = 0; i < 10; i++) {
		void *p = memalign(4096, 1000);
		if ((uintptr_t)p % 4096)
			exit(5);
		keep[nkeep++] = p;
	}
	void *q = NULL;                        /* 1 x 777 B posix_memalign 64 */
	if (posix_memalign(&q, 64, 777) || (uintptr_t)q % 64)
		exit(6);
	keep[nkeep++] = q;
	q = aligned_alloc(256, 512);           /* 1 x 512 B */
	if ((uintptr_t)q % 256)
		exit(7);
	keep[nkeep++] = q;
}
NOINLINE void zeroes(void) {                   /* 20 x (7 x 9) B calloc */
	for (int i = 0; i < 20; i++) {
		char *p = calloc(7, 9);
		for (int k = 0; k < 63; k++)
			if (p[k])
				exit(8);
		keep[nkeep++] = p;
	}
}
NOINLINE void churn(void) {                    /* 500 x 100 B, all freed */
	void *v[500];
	for (int i = 0; i < 500; i++)
		v[i] = malloc(100);
	for (int i = 0; i < 500; i++)
		free(v[i]);
}
NOINLINE void array_grow(void) {               /* reallocarray 5 x 24 -> 50 x 24 */
	void *p = reallocarray(NULL, 5, 24);
	p = reallocarray(p, 50, 24);
	keep[nkeep++] = p;
}

int main(void) {
	alloc_pages();
	map_megs();
	map_and_unmap();
	map_trim();
	map_grow();
	realloc_chain();
	aligned();
	zeroes();
	churn();
	array_grow();
	printf("done %d\n", nkeep);
	return 0;
}
