/* prog_znow — linked with -Wl,-z,now; takes &malloc and &free and calls
 * through the pointers (heaptrack's linkage tests). */
#include <stdio.h>
#include <stdlib.h>
int main(void) {
	void *(*m)(size_t) = malloc;
	void (*f)(void *) = free;
	void *keep[100];
	for (int i = 0; i < 100; i++)
		keep[i] = m(333);
	for (int i = 0; i < 50; i++)
		f(keep[i]);
	puts(keep[99] != NULL ? "znow ok 1" : "znow ok 0");
	return 7;
}
