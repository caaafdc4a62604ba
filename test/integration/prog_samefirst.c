/* prog_samefirst — 1024 call sites that share their innermost frame: a
 * recursion taking one of two functions at each of 10 levels, then
 * leaf()'s malloc of 100 bytes, kept (test_prom_file:samefirst: the .prom
 * file's line series are by frame, each frame once, its sites summed). */
#include <stdlib.h>

static void *keep[1024];
static int nkeep;
__attribute__((noinline)) static void a(int level, unsigned bits);
__attribute__((noinline)) static void b(int level, unsigned bits);
__attribute__((noinline)) static void leaf(void) { keep[nkeep++] = malloc(100); }
__attribute__((noinline)) static void a(int level, unsigned bits) {
	if (level == 10) leaf(); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void b(int level, unsigned bits) {
	if (level == 10) leaf(); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}

int main(void) {
	for (unsigned i = 0; i < 1024; i++)
		a(0, i);
	return 0;
}
