/* prombench N — N distinct call sites (up to 2^20), each holding one
 * block, made by a recursion that takes one of two functions at each of
 * 20 levels; then two requested snapshots ("filled", "measured") and the
 * exit.  Run with MEMTALLY_PROMETHEUS=DIR MEMTALLY_PROMETHEUS_INTERVAL=0,
 * the exit's .prom file says how long the "measured" snapshot's write of
 * it took (memtally_prometheus_write_seconds) and how many series it
 * holds whatever N is (make bench, issue 55). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define LEVELS 20
static void **keep;
static long nkeep;
__attribute__((noinline)) static void a(int level, unsigned bits);
__attribute__((noinline)) static void b(int level, unsigned bits);
__attribute__((noinline)) static void leaf(void) { keep[nkeep++] = malloc(32); }
__attribute__((noinline)) static void a(int level, unsigned bits) {
	if (level == LEVELS) leaf(); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void b(int level, unsigned bits) {
	if (level == LEVELS) leaf(); else if (bits >> level & 1) b(level + 1, bits); else a(level + 1, bits);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000;
	if (n > 1L << LEVELS)
		n = 1L << LEVELS;
	keep = calloc((size_t)n, sizeof *keep);
	int (*snap)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	for (long i = 0; i < n; i++)
		a(0, (unsigned)i);
	if (snap) {
		snap("filled");
		snap("measured");
	}
	return 0;
}
