/* prog_fast N — N malloc/free pairs as fast as it can, one thread, and
 * nothing else (MEMTALLY_EVERY's exact count: test_every). */
#include <stdlib.h>

int
main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 80000;
	void *volatile keep;
	for (long i = 0; i < n; i++) {
		keep = malloc(32 + (size_t)(i & 255));
		free(keep);
	}
	return 0;
}
