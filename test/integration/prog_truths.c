/* prog_truths.c — a C "trainer" with known truths for every view (test_answers):
 * 4 threads step together (a barrier a step, "step" marked by main);
 *  - leak A: thread 1 keeps 64 KiB a step at keep_a's malloc,
 *  - leak B: thread 2 keeps 192 KiB a step at keep_b's malloc,
 *  - a spike: at step SPIKE_STEP thread 3 allocates 32 MiB at make_spike's
 *    malloc and frees it at once; before the steps main loads and drops a
 *    128 MiB buffer (load_data's malloc), so the process's peak comes first
 *    and the spike is no new peak of the process: only the site's own peak
 *    (exact whichever thread charges it) can tell,
 *  - every thread churns small blocks, so each charges its own share of the
 *    call-site figures (the spike's size must still be exact).
 * argv[1]: steps (default 200); argv[2]: ms a step (default 10). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NT 4
#define SPIKE_STEP 30
#define SPIKE_BYTES (32u << 20)

static pthread_barrier_t bar;
static int steps = 200, ms = 10;
static void *kept[2][4096];

__attribute__((noinline)) static void
keep_a(int step) {
	kept[0][step] = malloc(64 << 10); /* LEAK_A */
	memset(kept[0][step], 1, 64 << 10);
}

__attribute__((noinline)) static void
keep_b(int step) {
	kept[1][step] = malloc(192 << 10); /* LEAK_B */
	memset(kept[1][step], 2, 192 << 10);
}

__attribute__((noinline)) static void
make_spike(void) {
	/* gone within microseconds: no snapshot can catch it live, so only
	 * the site's own peak can tell */
	volatile char *p = malloc(SPIKE_BYTES); /* SPIKE */
	p[0] = 3;
	free((void *)p);
}

__attribute__((noinline)) static void
load_data(void) {
	volatile char *p = malloc(128u << 20); /* LOAD */
	for (size_t i = 0; i < (128u << 20); i += 4096)
		p[i] = 1;
	free((void *)p);
}

__attribute__((noinline)) static void
churn(int t) {
	void *v[64];
	for (int i = 0; i < 64; i++)
		v[i] = malloc(32 + 16 * (i + t));
	for (int i = 0; i < 64; i++)
		free(v[i]);
}

static void *
worker(void *arg) {
	int t = (int)(long)arg;
	for (int s = 0; s < steps; s++) {
		pthread_barrier_wait(&bar);
		churn(t);
		if (t == 1)
			keep_a(s);
		if (t == 2)
			keep_b(s);
		if (t == 3 && s == SPIKE_STEP)
			make_spike();
		pthread_barrier_wait(&bar);
	}
	return NULL;
}

int
main(int argc, char **argv) {
	if (argc > 1)
		steps = atoi(argv[1]);
	if (argc > 2)
		ms = atoi(argv[2]);
	if (steps > 4096)
		steps = 4096;
	int (*mark)(const char *, double) = (int (*)(const char *, double))dlsym(RTLD_DEFAULT, "memtally_mark");
	load_data();
	pthread_barrier_init(&bar, NULL, NT);
	pthread_t th[NT];
	for (long t = 1; t < NT; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	struct timespec nap = {0, ms * 1000000L};
	for (int s = 0; s < steps; s++) {
		if (mark)
			mark("step", s);
		pthread_barrier_wait(&bar); /* the step runs */
		churn(0);
		pthread_barrier_wait(&bar);
		nanosleep(&nap, NULL);
	}
	for (int t = 1; t < NT; t++)
		pthread_join(th[t], NULL);
	printf("truths: %d steps done\n", steps);
	return 0;
}
