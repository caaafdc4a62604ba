/* insnbench — the program of `make bench`'s instruction table
 * (test/bench/insn.sh): one thread doing nothing but malloc/free pairs,
 * argv[2] of them, so that callgrind's instruction counts of two run
 * lengths differ by exactly the pairs' cost (start-up, the shim's
 * constructor and exit cancel).
 *
 * argv[1] "shallow": one call site, malloc called from leaf() <- loop()
 * <- main() <- libc's start (4 frames above malloc that a walk visits
 * before the loader's), sizes 16 B to 4 KiB.  "deep": 8 call sites,
 * reached through 20 to 27 frames (site k at depth 20 + k), the same
 * sizes.  Each pair frees at once what it allocated: the pointer table
 * holds one entry, the heap stays warm. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static size_t
next_size(void) {
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return 16 + (size_t)(rng % 4081); /* 16 B .. 4 KiB */
}

__attribute__((noinline)) static void
leaf(size_t n) {
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory"); /* keep the pair */
	free(p);
}

/* deep: depth d frames of descend() above leaf() */
__attribute__((noinline)) static void
descend(int d, size_t n) {
	if (d > 0)
		descend(d - 1, n);
	else
		leaf(n);
	__asm__ volatile("" ::: "memory"); /* no tail call: keep the frames */
}

__attribute__((noinline)) static void
loop(long pairs, int deep) {
	for (long i = 0; i < pairs; i++) {
		size_t n = next_size();
		if (deep)
			descend(16 + (int)(i & 7), n); /* + leaf, loop, main, libc: 20-27 */
		else
			leaf(n);
	}
}

int
main(int argc, char **argv) {
	if (argc < 3 || (strcmp(argv[1], "shallow") && strcmp(argv[1], "deep"))) {
		fprintf(stderr, "usage: insnbench shallow|deep PAIRS\n");
		return 2;
	}
	loop(atol(argv[2]), !strcmp(argv[1], "deep"));
	return 0;
}
