/* lib_alloc.so — dlopen'ed by prog_ctor: 30 x 5555 B from lib_alloc(),
 * 1 x 999 B from its constructor, and 1 x 777 B from its constructor
 * through eight calls (init_8 < init_7 < ... < init_1 < lib_ctor): more
 * than MEMTALLY_INITDEPTH keeps of frames inside an initializer; and
 * deep_alloc(n) for callers from Python. */
#include <stdlib.h>
static void *keep[64], *ctor_keep, *deep_keep;
#define STEP(n, next)                                                         \
	__attribute__((noinline)) static void *init_##n(void) {                \
		void *p = next;                                                \
		__asm__ volatile("" ::: "memory"); /* no tail call */          \
		return p;                                                      \
	}
STEP(8, malloc(777))
STEP(7, init_8())
STEP(6, init_7())
STEP(5, init_6())
STEP(4, init_5())
STEP(3, init_4())
STEP(2, init_3())
STEP(1, init_2())
__attribute__((constructor, noinline)) static void lib_ctor(void) {
	ctor_keep = malloc(999);
	deep_keep = init_1();
}
/* n calls deep, then 4321 B (test_pyframes: a deep native chain under
 * Python, through ctypes). */
__attribute__((noinline)) void *deep_alloc(int n);
__attribute__((noinline)) void *deep_alloc(int n) {
	void *p = n ? deep_alloc(n - 1) : malloc(4321);
	__asm__ volatile("" ::: "memory"); /* no tail call */
	return p;
}
void *lib_alloc(int i);
__attribute__((noinline)) void *lib_alloc(int i) {
	return keep[i] = malloc(5555);
}
