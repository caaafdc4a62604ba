/* prog_grow — grows resident memory by 1 MiB (touched) every argv[2] ms
 * from grow_step(), up to argv[1] MiB, then exits 0.  In a cgroup with a
 * smaller limit the kernel's OOM killer ends it first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((noinline)) static void *grow_step(void) {
	char *p = malloc(1 << 20);
	if (p)
		memset(p, 1, 1 << 20);
	return p;
}

int main(int argc, char **argv) {
	int mib = argc > 1 ? atoi(argv[1]) : 200, ms = argc > 2 ? atoi(argv[2]) : 20;
	static void *keep[100000];
	for (int i = 0; i < mib; i++) {
		keep[i] = grow_step();
		nanosleep(&(struct timespec){0, ms * 1000000L}, NULL);
	}
	printf("grew %d MiB\n", mib);
	return 0;
}
