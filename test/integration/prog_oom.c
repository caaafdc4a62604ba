/* prog_oom — caps its address space (RLIMIT_AS, argv[1] MiB), keeps 10000
 * x 1000 B from small_blocks(), then 1 MiB blocks from hold_blocks() until
 * malloc fails.  Its own NULL check then looks for the dump (argv[2] is the
 * output directory): the dump must be complete before malloc returned. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static void *small[10000], *big[100000];

__attribute__((noinline)) static void small_blocks(void) {
	for (int i = 0; i < 10000; i++)
		small[i] = malloc(1000);
}
__attribute__((noinline)) static void *hold_block(void) {
	return malloc(1 << 20);
}

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	struct rlimit r = {(rlim_t)atol(argv[1]) << 20, (rlim_t)atol(argv[1]) << 20};
	small_blocks();
	if (setrlimit(RLIMIT_AS, &r))
		return 3;
	int n = 0;
	for (;;) {
		void *p = hold_block();
		if (!p) {
			int e = errno;
			/* the program's own NULL check: is the dump already there? */
			int dumps = 0;
			DIR *d = opendir(argv[2]);
			struct dirent *de;
			while (d && (de = readdir(d)))
				dumps += strstr(de->d_name, ".oom1.jsonl") != NULL;
			if (d)
				closedir(d);
			printf("{\"blocks\":%d,\"errno\":%d,\"dump_before_return\":%d}\n", n, e, dumps);
			break;
		}
		big[n++] = p;
	}
	for (int i = 0; i < n; i++)
		free(big[i]);
	return 0;
}
