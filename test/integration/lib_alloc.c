/* lib_alloc.so — dlopen'ed by prog_ctor: 30 x 5555 B from lib_alloc(),
 * 1 x 999 B from its constructor. */
#include <stdlib.h>
static void *keep[64], *ctor_keep;
__attribute__((constructor, noinline)) static void lib_ctor(void) {
	ctor_keep = malloc(999);
}
void *lib_alloc(int i);
__attribute__((noinline)) void *lib_alloc(int i) {
	return keep[i] = malloc(5555);
}
