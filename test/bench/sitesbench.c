/* sitesbench — N distinct call sites (argv[1]), each holding one block,
 * made by a recursion that takes one of two functions at each of 17
 * levels (2^17 stacks possible), then a requested snapshot; the test
 * reads how long the snapshot after it took to write (shim.last_write_ns)
 * and the shim's memory.  With argv[2] = live, it instead keeps argv[1]
 * blocks live from one call site (the shim's memory per live block). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void **keep;
static long nkeep;
__attribute__((noinline)) static void a(int level, unsigned bits);
__attribute__((noinline)) static void b(int level, unsigned bits);
__attribute__((noinline)) static void leaf(void) { keep[nkeep++] = malloc(32); }
__attribute__((noinline)) static void a(int level, unsigned bits) {
	if (level == 17) leaf(); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void b(int level, unsigned bits) {
	if (level == 17) leaf(); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000;
	int live = argc > 2 && !strcmp(argv[2], "live");
	keep = calloc((size_t)n, sizeof *keep);
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	for (long i = 0; i < n; i++) {
		if (live)
			keep[nkeep++] = malloc(32);
		else
			a(0, (unsigned)i);
	}
	if (snap) {
		snap("filled");
		snap("measured"); /* its last_write_ns is the "filled" one's time */
	}
	return 0;
}
