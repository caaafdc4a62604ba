/* dlsymbench — what CUDA support costs a process that never uses CUDA:
 * the only hook on its path is dlsym.  Times argv[1] dlsym lookups of a
 * libc symbol and of a "cu..." name that does not exist. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	void *h = dlopen("libc.so.6", RTLD_NOW);
	struct timespec a, b;
	void *volatile sink;
	const char *names[2] = {"printf", "cuNotThere"};
	for (int k = 0; k < 2; k++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < n; i++)
			sink = dlsym(h, names[k]);
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("%s %.1f\n", names[k], ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	}
	(void)sink;
	return 0;
}
