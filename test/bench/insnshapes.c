/* insnshapes — the shape family of test/bench/insn.sh: the ways ordinary
 * code calls the allocator, each a loop of argv[2] units, so that
 * callgrind's counts of two run lengths differ by exactly the units' cost
 * (insnbench.c's method).  Built -O2 without frame pointers.  A unit:
 *
 *   main     a malloc/free pair straight from a loop in main, whose
 *            running sum lives in rbp across the calls (the asm below
 *            asks for it there: gcc's choice at -O2 for a value live
 *            across calls when the others are taken)
 *   fptr     a pair through function pointers (volatile: not folded)
 *   alt      a pair from one of two call sites, alternating
 *   realloc  one realloc of a growth chain (16 B doubling to 4 KiB, then
 *            freed and begun again with realloc(NULL, 16))
 *   calloc   a calloc/free pair
 *   ring     a pair whose free takes the block allocated 64 units
 *            earlier: 64 blocks stay live in a ring
 *
 * -DSHAPES_FP: for a build with frame pointers, where main's sum cannot
 * be asked for in rbp.  insnshapes_cxx.cc holds C++'s (new/delete through unique_ptr, vector). */
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

#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

static void *(*volatile alloc_p)(size_t) = malloc;
static void (*volatile free_p)(void *) = free;

__attribute__((noinline)) static void
via_pointers(long units) {
	for (long i = 0; i < units; i++) {
		void *p = alloc_p(next_size());
		KEEP(p);
		free_p(p);
	}
}

__attribute__((noinline)) static void
site_a(size_t n) {
	void *p = malloc(n);
	KEEP(p);
	free(p);
}

__attribute__((noinline)) static void
site_b(size_t n) {
	void *p = malloc(n + 8); /* not site_a's code: gcc would fold the two */
	KEEP(p);
	free(p);
}

__attribute__((noinline)) static void
alternating(long units) {
	for (long i = 0; i < units; i++) {
		if (i & 1)
			site_b(next_size());
		else
			site_a(next_size());
	}
}

__attribute__((noinline)) static void
growth(long units) {
	void *p = NULL;
	size_t n = 16;
	for (long i = 0; i < units; i++) {
		p = realloc(p, n);
		KEEP(p);
		n *= 2;
		if (n > 4096) {
			free(p);
			p = NULL;
			n = 16;
		}
	}
	free(p);
}

__attribute__((noinline)) static void
zeroed(long units) {
	for (long i = 0; i < units; i++) {
		void *p = calloc(1, next_size());
		KEEP(p);
		free(p);
	}
}

__attribute__((noinline)) static void
ring(long units) {
	void *live[64] = {0};
	for (long i = 0; i < units; i++) {
		free(live[i & 63]); /* the block of 64 units ago (NULL at first) */
		live[i & 63] = malloc(next_size());
		KEEP(live[i & 63]);
	}
	for (int k = 0; k < 64; k++)
		free(live[k]);
}

int
main(int argc, char **argv) {
	static const char *const shapes[] = {"main", "fptr", "alt", "realloc", "calloc", "ring"};
	int s = -1;
	for (int k = 0; argc >= 3 && k < 6; k++)
		if (!strcmp(argv[1], shapes[k]))
			s = k;
	if (s < 0) {
		fprintf(stderr, "usage: insnshapes main|fptr|alt|realloc|calloc|ring UNITS\n");
		return 2;
	}
	long units = atol(argv[2]);
	switch (s) {
	case 0: {
		/* the loop in main itself: sum lives in rbp across malloc and
		 * free, a value that differs on every call */
#ifndef SHAPES_FP
		register uint64_t sum __asm__("rbp") = 0;
#else /* built with frame pointers (test_cfi_programs): rbp is taken */
		uint64_t sum = 0;
#endif
		for (long i = 0; i < units; i++) {
			void *p = malloc(next_size());
			KEEP(p);
			free(p);
			sum += (uint64_t)i * 0x9e3779b97f4a7c15ull;
			__asm__ volatile("" : "+r"(sum)); /* in rbp, each round */
		}
		return (int)(sum & 1) * 0;
	}
	case 1:
		via_pointers(units);
		break;
	case 2:
		alternating(units);
		break;
	case 3:
		growth(units);
		break;
	case 4:
		zeroed(units);
		break;
	case 5:
		ring(units);
		break;
	}
	return 0;
}
