/* prog_errno — errno after every hooked call, success and failure, with a
 * sentinel set before each call.  Prints one line per call; the test runs
 * it with and without the shim and compares the outputs. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define SHOW(what, expr)                                                       \
	do {                                                                   \
		errno = 4242;                                                  \
		long r_ = (long)(expr);                                        \
		printf("%-28s errno=%d ok=%d\n", what, errno, r_ != 0 && r_ != -1); \
	} while (0)

int main(void) {
	void *p = NULL, *q;
	SHOW("malloc ok", p = malloc(100));
	SHOW("malloc huge", malloc(SIZE_MAX / 2));
	SHOW("calloc ok", q = calloc(3, 5));
	SHOW("calloc overflow", calloc(SIZE_MAX / 2, 3));
	SHOW("realloc ok", p = realloc(p, 5000));
	SHOW("realloc huge", realloc(p, SIZE_MAX / 2));
	SHOW("reallocarray ok", p = reallocarray(p, 10, 20));
	SHOW("reallocarray overflow", reallocarray(p, SIZE_MAX / 2, 3));
	SHOW("free", (free(q), 1));
	SHOW("free NULL", (free(NULL), 1));
	void *a = NULL;
	SHOW("posix_memalign ok", posix_memalign(&a, 64, 100) == 0);
	SHOW("posix_memalign bad align", posix_memalign(&a, 3, 100));
	SHOW("posix_memalign huge", posix_memalign(&a, 64, SIZE_MAX / 2));
	SHOW("aligned_alloc ok", aligned_alloc(64, 128));
	SHOW("aligned_alloc bad align", aligned_alloc(3, 128));
	SHOW("memalign ok", memalign(32, 10));
	SHOW("memalign huge", memalign(32, SIZE_MAX / 2));
	SHOW("valloc ok", valloc(10));
	SHOW("pvalloc ok", pvalloc(10));
	SHOW("mmap ok", (q = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) != MAP_FAILED);
	SHOW("mmap bad fd", mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 12345, 0) != MAP_FAILED);
	SHOW("mmap64 ok", mmap64(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED);
	SHOW("mremap ok", (q = mremap(q, 8192, 16384, MREMAP_MAYMOVE)) != MAP_FAILED);
	SHOW("mremap bad", mremap((char *)q + 1, 4096, 8192, 0) != MAP_FAILED);
	SHOW("munmap bad", munmap((char *)q + 1, 4096) == 0);
	SHOW("munmap ok", munmap(q, 16384) == 0);
	SHOW("free after", (free(p), 1));
	return 0;
}
