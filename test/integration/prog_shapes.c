/* prog_shapes SHAPE [marks] — trainer-shaped memory over 400 steps, a
 * snapshot every 10 (40 in all), for judging leak verdicts (issue 15):
 *   early, middle, late  a 64 MiB evaluation buffer held for 10 steps at
 *                        steps 40, 190 or 350, and 48 KiB leaked a step
 *   ckpt                 a 64 MiB checkpoint buffer every 50 steps, held 5
 *                        steps, and the leak
 *   bursty               480 KiB leaked every 10th step only
 *   teardown             the leak, and everything freed on the way out
 *                        (snapshots at exit: the interpreter's finalization)
 *   cache                a cache that fills to 8 MiB over 100 steps, then
 *                        evicts (no leak)
 *   noleak               churn and an early spike only (no leak)
 * With "marks", each step is marked "step" (memtally_mark).  Each step
 * also sleeps 1 ms, as a trainer's step takes time of its own: without it
 * the run's time was mostly the 64 MiB buffer's page faults, and how many
 * snapshots fell after leaks' warm-up (a fifth of the run's time) moved
 * with the machine's load (8 to 14 for "late"). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEPS 400
static int (*snap)(const char *);
static int (*mark)(const char *, double);
static void *kept[STEPS * 2];
static int nkept;
static void *cache[128];

__attribute__((noinline)) static void leak_step(size_t n) {
	char *p = malloc(n);
	memset(p, 1, n);
	kept[nkept++] = p;
}
__attribute__((noinline)) static void *eval_buffer(void) {
	char *p = malloc(64 << 20);
	memset(p, 2, 64 << 20);
	return p;
}
__attribute__((noinline)) static void cache_put(int step) {
	int slot = step % 128;
	free(cache[slot]);
	cache[slot] = malloc(65536);
	memset(cache[slot], 3, 65536);
}
__attribute__((noinline)) static void churn(int step) {
	void *t[50];
	for (int i = 0; i < 50; i++)
		t[i] = malloc(100 + (i * 31 + step) % 3000);
	for (int i = 0; i < 50; i++)
		free(t[i]);
}

int main(int argc, char **argv) {
	const char *shape = argc > 1 ? argv[1] : "noleak";
	int marks = argc > 2 && !strcmp(argv[2], "marks");
	snap = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	mark = (int (*)(const char *, double))dlsym(RTLD_DEFAULT, "memtally_mark");
	int spike_at = !strcmp(shape, "early") || !strcmp(shape, "noleak") ? 40
		       : !strcmp(shape, "middle")                         ? 190
		       : !strcmp(shape, "late")                           ? 350
									  : -1;
	int leaks = strcmp(shape, "cache") && strcmp(shape, "noleak");
	void *spike = NULL;
	for (int step = 1; step <= STEPS; step++) {
		if (mark && marks)
			mark("step", step);
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
		churn(step);
		if (!strcmp(shape, "cache") && step <= 200)
			cache_put(step > 100 ? step % 100 : step);
		if (step == spike_at || (!strcmp(shape, "ckpt") && step % 50 == 0))
			spike = eval_buffer();
		if (spike && (step == spike_at + 10 || (!strcmp(shape, "ckpt") && step % 50 == 5))) {
			free(spike);
			spike = NULL;
		}
		if (leaks && !strcmp(shape, "bursty")) {
			if (step % 10 == 0)
				leak_step(480 << 10);
		} else if (leaks) {
			leak_step(48 << 10);
		}
		if (snap && step % 10 == 0)
			snap("step");
	}
	if (!strcmp(shape, "teardown")) { /* the way out frees what was held */
		for (int i = 0; i < nkept; i++) {
			free(kept[i]);
			if (snap && i % (nkept / 4) == 0)
				snap("teardown");
		}
	}
	printf("%s done\n", shape);
	return 0;
}
