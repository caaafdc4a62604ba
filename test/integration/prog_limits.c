/* prog_limits — what a program sees of its own limits (test_limits.py):
 *   prog_limits fds     the first descriptor it opens, and how many it can
 *                       open before EMFILE ("first 3 count 60"); exits
 *                       with them open
 *   prog_limits fds close  the same, then closes them before it exits
 *   prog_limits fds oom    the same, then malloc(64 TiB) fails ("malloc
 *                       failed"), then it closes them and exits
 *   prog_limits calloc  calloc(1, 8 MiB) succeeds ("calloc ok")
 * Output only; exit 0 unless the allocation fails (exit 3). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
main(int argc, char **argv) {
	const char *what = argc > 1 ? argv[1] : "fds";
	if (!strcmp(what, "fds")) {
		int first = open("/dev/null", O_RDONLY), n = first >= 0, last = first, fd;
		while ((fd = open("/dev/null", O_RDONLY)) >= 0) {
			n++;
			last = fd;
		}
		printf("first %d count %d\n", first, n);
		if (argc > 2 && !strcmp(argv[2], "oom")) {
			void *volatile p = malloc((size_t)1 << 46);
			printf("malloc %s\n", p ? "ok" : "failed");
			free(p);
		}
		if (argc > 2 && strcmp(argv[2], "close") && strcmp(argv[2], "oom"))
			return 2;
		if (argc > 2)
			for (fd = first; first >= 0 && fd <= last; fd++)
				close(fd);
		return 0;
	}
	char *p = calloc(1, 8 << 20);
	printf("calloc %s\n", p ? "ok" : "failed");
	if (p)
		p[(8 << 20) - 1] = 1;
	return p ? 0 : 3;
}
