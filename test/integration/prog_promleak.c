/* prog_promleak SECONDS KIB [LEAKER] — one rank of a two-rank "job" for
 * test_prometheus: every 100 ms it marks "step" (through the C API, when
 * the shim is there), allocates and frees some churn, and the rank whose
 * RANK equals LEAKER (default 1) also keeps KIB KiB more (leak_tick()),
 * touched, so its heap grows steadily while the other's stays flat.  Runs
 * SECONDS seconds, then exits 0. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((noinline)) static void *leak_tick(size_t n) {
	void *p = malloc(n);
	if (p)
		memset(p, 1, n);
	return p;
}

__attribute__((noinline)) static void churn(int n) {
	for (int i = 0; i < n; i++) {
		void *p = malloc(64 + (size_t)(i % 4096));
		free(p);
	}
}

int main(int argc, char **argv) {
	double secs = argc > 1 ? atof(argv[1]) : 10;
	size_t kib = argc > 2 ? (size_t)atol(argv[2]) : 256;
	long leaker = argc > 3 ? atol(argv[3]) : 1;
	const char *r = getenv("RANK");
	int leaks = r && atol(r) == leaker;
	int (*mark)(const char *, double) = (int (*)(const char *, double))dlsym(RTLD_DEFAULT, "memtally_mark");
	void *steady = malloc(4 << 20); /* both ranks: the same base */
	memset(steady, 2, 4 << 20);
	long ticks = (long)(secs * 10);
	for (long t = 0; t < ticks; t++) {
		if (mark)
			mark("step", (double)t);
		churn(2000);
		if (leaks)
			(void)leak_tick(kib << 10);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	printf("rank %s leaked %d\n", r ? r : "-", leaks);
	free(steady);
	return 0;
}
