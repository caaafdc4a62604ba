/* prog_solo — the main thread allocates and frees at shared_site without
 * pause while it starts worker threads that do the same at the same site
 * (up to 6 running at once, 40 in all), so the shim's solo mode (one
 * thread recording with plain updates, shim/state/solo.h) ends while the main
 * thread is in its hooks; then a fork child records alone again.  Prints
 * what it computed; the test compares the shim's figures. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NW 40
#define RUNNING 6
#define SLOTS 128
static long wops = 200000;
static uint64_t total_allocs, total_bytes; /* at shared_site, all threads */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) static void *
shared_site(size_t n) {
	void *p = malloc(n);
	if (!p)
		abort();
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) static void *
alone_site(size_t n) {
	void *p = malloc(n);
	__asm__ volatile("" ::: "memory");
	return p;
}

/* slots[] of blocks at shared_site: allocate into an empty one, free a
 * full one; returns the allocations made. */
static void
churn(void **slot, long n, uint64_t *rng, uint64_t *allocs, uint64_t *bytes) {
	for (long i = 0; i < n; i++) {
		*rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
		int s = (int)(*rng % SLOTS);
		if (slot[s]) {
			free(slot[s]);
			slot[s] = NULL;
		} else {
			size_t z = 1 + (*rng >> 24) % 512;
			slot[s] = shared_site(z);
			++*allocs, *bytes += z;
		}
	}
	for (int s = 0; s < SLOTS; s++) {
		free(slot[s]);
		slot[s] = NULL;
	}
}

static void *
worker(void *arg) {
	void *slot[SLOTS] = {0};
	uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 7), a = 0, b = 0;
	churn(slot, wops, &rng, &a, &b);
	pthread_mutex_lock(&mu);
	total_allocs += a, total_bytes += b;
	pthread_mutex_unlock(&mu);
	return NULL;
}

int
main(int argc, char **argv) {
	if (argc > 1)
		wops = atol(argv[1]);
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	void *keep[10];
	for (int i = 0; i < 10; i++)
		keep[i] = alone_site(100);
	if (snap && snap("alone"))
		return 10;
	pthread_t th[NW];
	void *slot[SLOTS] = {0};
	uint64_t rng = 1, a = 0, b = 0;
	for (int i = 0; i < NW; i++) {
		if (i >= RUNNING)
			pthread_join(th[i - RUNNING], NULL);
		/* a new thread's first hooks run while this one churns */
		if (pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i))
			return 11;
		churn(slot, wops / 4, &rng, &a, &b);
	}
	for (int i = NW - RUNNING; i < NW; i++)
		pthread_join(th[i], NULL);
	total_allocs += a, total_bytes += b;
	pid_t child = fork();
	if (child == 0) { /* records alone again: 10 more blocks */
		void *more[10];
		for (int i = 0; i < 10; i++)
			more[i] = alone_site(1000);
		__asm__ volatile("" ::"r"(more) : "memory");
		_exit(snap && snap("child") ? 1 : 0);
	}
	int st;
	if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
		return 12;
	if (snap && snap("end"))
		return 13;
	printf("{\"allocs\":%lu,\"alloc_bytes\":%lu,\"child\":%d}\n", (unsigned long)total_allocs,
	       (unsigned long)total_bytes, (int)child);
	for (int i = 0; i < 10; i++)
		free(keep[i]);
	return 0;
}
