/* prog_asked — mappings whose lengths are not whole pages (test_asked.py):
 * each function is one call site; what each asks for and maps is known.
 *   many_small:  10 x mmap(2048), kept: asked 20480, mapped 40960
 *   whole_pages: 4 x mmap(8192), kept: asked = mapped (no asked figure)
 *   grown:       mmap(5000), then mremap to 9000 bytes (may move): asked
 *                5000 + 9000, mapped 8192 + 12288 (mremap maps anew)
 *   from_file:   100 bytes of a file (argv[1]) mapped: asked 100, mapped 4096
 * Prints "ok" and exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static void *kept[32];
static int nkept;

__attribute__((noinline)) static void
many_small(void) {
	for (int i = 0; i < 10; i++)
		kept[nkept++] = mmap(NULL, 2048, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

__attribute__((noinline)) static void
whole_pages(void) {
	for (int i = 0; i < 4; i++)
		kept[nkept++] = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

__attribute__((noinline)) static void
grown(void) {
	void *p = mmap(NULL, 5000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	kept[nkept++] = mremap(p, 5000, 9000, MREMAP_MAYMOVE);
}

__attribute__((noinline)) static int
from_file(const char *path) {
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	kept[nkept++] = mmap(NULL, 100, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	return 0;
}

int
main(int argc, char **argv) {
	many_small();
	whole_pages();
	grown();
	if (argc < 2 || from_file(argv[1]))
		return 2;
	for (int i = 0; i < nkept; i++)
		if (kept[i] == MAP_FAILED)
			return 3;
	printf("ok\n");
	return 0;
}
