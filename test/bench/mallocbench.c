/* mallocbench — the malloc-heavy workload of `make bench`: NT threads
 * (argv[2], default 2), each argv[1] operations (default 2,000,000) on a
 * sliding window of 5000 live objects (10 k over 2 threads); sizes mostly
 * 16-512 B, some 4-64 KiB, rarely 1 MiB; allocated from 50 call sites at
 * stack depths 5 to 15.  Prints ns per malloc+free pair of the timed loop
 * (the warm-up fill excluded) and a checksum. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WINDOW 5000
static long nops = 2000000;

struct th { void *slot[WINDOW]; uint64_t rng, sum; double ns; };

static uint64_t rnd(struct th *t) { t->rng ^= t->rng << 13; t->rng ^= t->rng >> 7; t->rng ^= t->rng << 17; return t->rng; }

static size_t pick_size(uint64_t r) {
	unsigned p = r % 10000;
	if (p < 8590) return 16 + (r >> 20) % 497;          /* 85.9%: 16-512 B */
	if (p < 9990) return 4096 + (r >> 20) % (60 << 10); /* 14%: 4-64 KiB */
	return 1 << 20;                                      /* 0.1%: 1 MiB */
}

/* 50 call sites: leaf k allocates, reached through 5 + k % 11 frames. */
typedef void *(*leaf_fn)(size_t);
#define LEAF(k) __attribute__((noinline)) static void *leaf##k(size_t n) { void *p = malloc(n); __asm__ volatile("" ::: "memory"); return p; }
#define L10(a) LEAF(a##0) LEAF(a##1) LEAF(a##2) LEAF(a##3) LEAF(a##4) LEAF(a##5) LEAF(a##6) LEAF(a##7) LEAF(a##8) LEAF(a##9)
L10(1) L10(2) L10(3) L10(4) L10(5)
static leaf_fn leaves[50] = {
#define R10(a) leaf##a##0, leaf##a##1, leaf##a##2, leaf##a##3, leaf##a##4, leaf##a##5, leaf##a##6, leaf##a##7, leaf##a##8, leaf##a##9
	R10(1), R10(2), R10(3), R10(4), R10(5)};

__attribute__((noinline)) static void *descend(int depth, int k, size_t n) {
	void *p = depth <= 0 ? leaves[k](n) : descend(depth - 1, k, n);
	__asm__ volatile("" ::: "memory"); /* no tail call: keep the frames */
	return p;
}

static void *alloc_at(int k, size_t n) { return descend(5 + k % 11 - 2, k, n); }

static void *worker(void *arg) {
	struct th *t = arg;
	for (int i = 0; i < WINDOW; i++) {
		uint64_t r = rnd(t);
		t->slot[i] = alloc_at((int)(r % 50), pick_size(r >> 8));
	}
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < nops; i++) {
		uint64_t r = rnd(t);
		int s = (int)(r % WINDOW);
		free(t->slot[s]);
		size_t n = pick_size(r >> 16);
		char *p = alloc_at((int)((r >> 40) % 50), n);
		p[0] = (char)i;
		t->sum += (uintptr_t)p[0];
		t->slot[s] = p;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	t->ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)nops;
	for (int i = 0; i < WINDOW; i++)
		free(t->slot[i]);
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 1)
		nops = atol(argv[1]);
	int nt = argc > 2 ? atoi(argv[2]) : 2;
	static struct th ts[16];
	pthread_t tid[16];
	for (int i = 0; i < nt; i++) {
		ts[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		pthread_create(&tid[i], NULL, worker, &ts[i]);
	}
	double ns = 0;
	uint64_t sum = 0;
	for (int i = 0; i < nt; i++) {
		pthread_join(tid[i], NULL);
		ns += ts[i].ns;
		sum += ts[i].sum;
	}
	printf("ns_per_pair %.1f sum %llu\n", ns / nt, (unsigned long long)sum);
	return 0;
}
