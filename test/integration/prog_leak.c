/* prog_leak — a 100 MiB leak of 1 KiB blocks from leak_blocks(), among
 * churn that is freed.  argv[1] scales the leak in MiB. */
#include <stdio.h>
#include <stdlib.h>

static void **keep;

__attribute__((noinline)) static void leak_blocks(long n) {
	for (long i = 0; i < n; i++)
		keep[i] = malloc(1024);
}
__attribute__((noinline)) static void churn(long n) {
	for (long i = 0; i < n; i++) {
		void *p = malloc(64 + i % 512);
		free(p);
	}
}

int main(int argc, char **argv) {
	long mib = argc > 1 ? atol(argv[1]) : 100;
	long n = mib * 1024;
	keep = calloc(n, sizeof *keep);
	for (int r = 0; r < 10; r++) {
		leak_blocks(n / 10);
		keep += n / 10;
		churn(20000);
	}
	printf("leaked %ld blocks\n", n);
	return 0;
}
