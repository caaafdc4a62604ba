/* snapcost — what a snapshot costs against the number of call sites
 * (test/bench/snapcost.sh): argv[1] distinct stacks, each holding one
 * block (a recursion taking one of two functions at each of 18 levels:
 * up to 262144 stacks), then argv[2] rounds that each allocate and free
 * at argv[3] of those sites and request a snapshot (memtally_snapshot).
 * Each snapshot record's shim.last_write_ns is the time the one before
 * took to write; the script reads them. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define LEVELS 18
static void **keep;
static long nkeep;
static int freeing;
__attribute__((noinline)) static void a(int level, unsigned bits);
__attribute__((noinline)) static void b(int level, unsigned bits);
__attribute__((noinline)) static void leaf(void) {
	void *p = malloc(32);
	if (freeing)
		free(p);
	else
		keep[nkeep++] = p;
}
__attribute__((noinline)) static void a(int level, unsigned bits) {
	if (level == LEVELS) leaf(); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void b(int level, unsigned bits) {
	if (level == LEVELS) leaf(); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000;
	long rounds = argc > 2 ? atol(argv[2]) : 10;
	long touch = argc > 3 ? atol(argv[3]) : 100;
	keep = calloc((size_t)n, sizeof *keep);
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	if (!snap) {
		fprintf(stderr, "snapcost: run under the shim\n");
		return 2;
	}
	for (long i = 0; i < n; i++)
		a(0, (unsigned)i);
	snap("filled");
	freeing = 1;
	for (long r = 0; r < rounds; r++) {
		for (long k = 0; k < touch; k++)
			a(0, (unsigned)((r * touch + k) % n));
		snap("round");
	}
	snap("last"); /* its last_write_ns is the last round's */
	return 0;
}
