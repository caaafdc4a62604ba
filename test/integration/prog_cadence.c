/* prog_cadence MS — allocates for MS milliseconds without a step mark (as a
 * DataLoader worker or a C program does): a few small blocks made and
 * freed, and one 1 KiB block kept, every 100 microseconds.  The time
 * cadence should give it snapshots all along (test_steps). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static void *
keep_one(void) {
	void *p = malloc(1024);
	if (p)
		memset(p, 1, 1024);
	return p;
}

int
main(int argc, char **argv) {
	double ms = argc > 1 ? atof(argv[1]) : 1000, t0 = now_ms();
	static void *kept[1 << 20];
	size_t n = 0;
	struct timespec pause = {0, 100000};
	while (now_ms() - t0 < ms && n < sizeof kept / sizeof *kept) {
		for (int i = 0; i < 8; i++)
			free(malloc(64 + i * 32));
		kept[n++] = keep_one();
		nanosleep(&pause, NULL);
	}
	return 0;
}
