/* unwindbench — ns per captured stack with the shim's own capture
 * (shim/capture/unwind.c): libunwind's unw_backtrace, the frame-pointer walk and
 * the CFI walker (shim/capture/cfi.c), at depths 10 and 30, the same stack captured repeatedly (caches hot, as
 * for a call site seen before). */
#include "capture/unwind.h"
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static volatile int sink;
__attribute__((noinline)) static double chain(int depth, int fp, int reps) {
	if (depth > 0) {
		double r = chain(depth - 1, fp, reps);
		sink++;
		return r;
	}
	uintptr_t pcs[128];
	int n = 0;
	double t0 = now();
	for (int i = 0; i < reps; i++)
		n += mt_unwind(pcs, 128, fp, 0, 0, 0);
	double t = (now() - t0) / reps;
	sink += n;
	return t;
}

int main(void) {
	mt_unwind_init(dlsym);
	static const char *const name[] = {"libunwind", "fp", "cfi"};
	for (int how = 0; how < 3; how++)
		for (int d = 10; d <= 30; d += 20) {
			chain(d - 4, how, 1000); /* warm */
			printf("%s %d %.1f\n", name[how], d, chain(d - 4, how, 20000));
		}
	return 0;
}
