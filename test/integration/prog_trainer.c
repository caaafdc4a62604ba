/* prog_trainer — a training loop in miniature: per step, churn (temporary
 * buffers freed), an LRU cache of 32 entries (full after 32 of 200 steps),
 * an mmap'd checkpoint every 25 steps (unmapped after writing), and with
 * argv[1] == "leak" 10 KiB kept per step in leak_history().  Marks "step"
 * and requests a snapshot every 5 steps through the C API. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int (*snap)(const char *);
static int (*mark)(const char *, double);

struct entry { int key; char *data; };
static struct entry cache[32];
static int ncache, clock_hand;
static void *history[10000];
static int nhistory;

__attribute__((noinline)) static void churn(int step) {
	void *t[200];
	for (int i = 0; i < 200; i++)
		t[i] = malloc(64 + (i * 37 + step) % 4000);
	for (int i = 0; i < 200; i++)
		free(t[i]);
}
__attribute__((noinline)) static void cache_put(int key) {
	for (int i = 0; i < ncache; i++)
		if (cache[i].key == key)
			return;
	if (ncache < 32) {
		cache[ncache].key = key;
		cache[ncache++].data = malloc(16384);
		return;
	}
	free(cache[clock_hand].data); /* evict */
	cache[clock_hand].key = key;
	cache[clock_hand].data = malloc(16384);
	clock_hand = (clock_hand + 1) % 32;
}
__attribute__((noinline)) static void checkpoint(void) {
	size_t n = 8 << 20;
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(p, 1, n);
	munmap(p, n);
}
__attribute__((noinline)) static void leak_history(int step) {
	char *p = malloc(10240);
	memset(p, step, 10240);
	history[nhistory++] = p;
}

int main(int argc, char **argv) {
	int leak = argc > 1 && !strcmp(argv[1], "leak");
	int steps = argc > 2 ? atoi(argv[2]) : 200;
	snap = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	mark = (int (*)(const char *, double))dlsym(RTLD_DEFAULT, "memtally_mark");
	for (int step = 1; step <= steps; step++) {
		if (mark)
			mark("step", step);
		churn(step);
		cache_put(step * 7 % 1000);
		if (step % 25 == 0)
			checkpoint();
		if (leak)
			leak_history(step);
		if (snap && step % 5 == 0)
			snap("step");
	}
	printf("trained %d steps\n", steps);
	return 0;
}
