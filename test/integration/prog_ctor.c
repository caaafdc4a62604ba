/* prog_ctor — allocates in a constructor, before main, and in a dlopen'ed
 * library (lib_alloc.so, path in argv[1]) that allocates in its own
 * constructor and in a function. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
static void *early;
__attribute__((constructor, noinline)) static void ctor_alloc(void) {
	early = malloc(4242);
}
int main(int argc, char **argv) {
	if (argc < 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h) {
		printf("dlopen failed: %s\n", dlerror());
		return 3;
	}
	void *(*lib_alloc)(int) = (void *(*)(int))dlsym(h, "lib_alloc");
	for (int i = 0; i < 30; i++)
		lib_alloc(i);
	printf("ctor ok %d\n", early != NULL);
	return 0;
}
