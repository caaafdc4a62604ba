/* prog_changed — threads charging thousands of call sites while
 * snapshots are written: every snapshot after the first lists only the
 * sites that changed since the one before (a byte per group of 64 stack
 * ids the charges set, doc/FORMAT.md "callsites_mode"), so a charge the
 * writer misses would leave a row stale in every later snapshot.
 *
 * argv[1] threads (4) x argv[2] operations (200000) each: a random one of
 * 4096 call sites (a recursion taking one of two functions at each of 12
 * levels: the site's number in its bits) allocates a block of 16-1040
 * bytes into the thread's ring of 512, freeing what the ring held there
 * (often another site's block: a free charges the block's site).  A
 * thread of its own requests snapshots (memtally_snapshot) back to back
 * meanwhile.  After the threads are joined it requests "end" and prints
 * "again" (nothing charged between the two) and prints
 * its own figures per site, as JSON: {"site": [live_bytes, live_count,
 * allocs, frees], ...} for every site it charged; the test compares them
 * with the "end" snapshot's rows, replayed from its deltas. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LEVELS 12
#define NSITES (1 << LEVELS)
#define RING 512
struct tally { long live, count, allocs, frees; };
static struct tally tally[NSITES]; /* under tlock */
static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
struct block { void *p; size_t size; unsigned site; };
static __thread struct block *out; /* the block leaf() made */
static __thread size_t want;

__attribute__((noinline)) static void a(int level, unsigned bits);
__attribute__((noinline)) static void b(int level, unsigned bits);
__attribute__((noinline)) static void leaf(unsigned bits) {
	out->p = malloc(want);
	out->size = want;
	out->site = bits;
}
__attribute__((noinline)) static void a(int level, unsigned bits) {
	if (level == LEVELS) leaf(bits); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void b(int level, unsigned bits) {
	if (level == LEVELS) leaf(bits); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}

static long nops = 200000;
static volatile int running = 1;
static int (*snap)(const char *);

static void *worker(void *arg) {
	uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
	struct block ring[RING] = {{0}};
	struct tally *mine = calloc(NSITES, sizeof *mine);
	for (long i = 0; i < nops; i++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		struct block *x = &ring[rng % RING];
		if (x->p) {
			free(x->p);
			mine[x->site].live -= (long)x->size, mine[x->site].count--, mine[x->site].frees++;
		}
		out = x;
		want = 16 + (rng >> 20) % 1025;
		a(0, (unsigned)(rng >> 40) % NSITES);
		mine[x->site].live += (long)x->size, mine[x->site].count++, mine[x->site].allocs++;
	}
	pthread_mutex_lock(&tlock);
	for (int s = 0; s < NSITES; s++) {
		tally[s].live += mine[s].live, tally[s].count += mine[s].count;
		tally[s].allocs += mine[s].allocs, tally[s].frees += mine[s].frees;
	}
	pthread_mutex_unlock(&tlock);
	free(mine);
	return NULL; /* the ring's blocks stay live */
}

static void *snapper(void *arg) {
	long *n = arg;
	while (__atomic_load_n(&running, __ATOMIC_ACQUIRE)) {
		snap("mid");
		++*n;
	}
	return NULL;
}

int main(int argc, char **argv) {
	int nt = argc > 1 ? atoi(argv[1]) : 4;
	if (argc > 2)
		nops = atol(argv[2]);
	snap = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	if (!snap) {
		fprintf(stderr, "prog_changed: run under the shim\n");
		return 2;
	}
	pthread_t t[64], s;
	long nsnaps = 0;
	pthread_create(&s, NULL, snapper, &nsnaps);
	for (int i = 0; i < nt && i < 64; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (int i = 0; i < nt && i < 64; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&running, 0, __ATOMIC_RELEASE);
	pthread_join(s, NULL);
	snap("end");
	snap("again"); /* nothing charged since "end" */
	printf("{\"snapshots\": %ld, \"sites\": {", nsnaps);
	const char *sep = "";
	for (int i = 0; i < NSITES; i++) {
		if (!tally[i].allocs)
			continue;
		printf("%s\"%d\": [%ld, %ld, %ld, %ld]", sep, i, tally[i].live, tally[i].count, tally[i].allocs,
		       tally[i].frees);
		sep = ", ";
	}
	printf("}}\n");
	return 0;
}
