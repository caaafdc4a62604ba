/* prog_deep — allocations argv[1] frames deep: rec() recurses that many
 * times and allocates 4 blocks of 1000 bytes (kept) at the bottom, called
 * from outer_user() in main, or in a thread of its own with argv[2]
 * "thread".  test_deep compares the stacks the shim keeps past
 * MEMTALLY_DEPTH with the whole stack. */
#include <pthread.h>
#include <stdlib.h>

static void *keep[4];
__attribute__((noinline)) static void *rec(int d, int i) {
	void *p = d == 0 ? malloc(1000 + (size_t)i) : rec(d - 1, i);
	__asm__ volatile("" ::: "memory");
	return p;
}
__attribute__((noinline)) static void *outer_user(void *arg) {
	int depth = (int)(long)arg;
	for (int i = 0; i < 4; i++)
		keep[i] = rec(depth, i);
	return NULL;
}
int main(int argc, char **argv) {
	long depth = argc > 1 ? atol(argv[1]) : 60;
	if (argc > 2 && argv[2][0] == 't') {
		pthread_t t;
		pthread_create(&t, NULL, outer_user, (void *)depth);
		pthread_join(t, NULL);
	} else {
		outer_user((void *)depth);
	}
	return 0;
}
