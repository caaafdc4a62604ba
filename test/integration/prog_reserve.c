/* prog_reserve — reserve 1 GiB of address space (mmap PROT_NONE, as Go's
 * arenas and JITs do), make 16 MiB of it memory with mprotect and touch
 * it, then 8 MiB more with mmap MAP_FIXED; take 4 MiB back to PROT_NONE.
 * Prints nothing; test_reserved reads its file. */
#include <string.h>
#include <sys/mman.h>

int
main(void) {
	size_t gib = 1ul << 30, mib = 1ul << 20;
	char *r = mmap(NULL, gib, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return 1;
	if (mprotect(r, 16 * mib, PROT_READ | PROT_WRITE))
		return 2;
	memset(r, 1, 16 * mib);
	char *f = mmap(r + 64 * mib, 8 * mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		       -1, 0);
	if (f == MAP_FAILED)
		return 3;
	memset(f, 1, 8 * mib);
	if (mprotect(r + 12 * mib, 4 * mib, PROT_NONE))
		return 4;
	return 0;
}
