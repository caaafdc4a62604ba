/* prog_alike — two call sites that print alike: main calls
 * alloc_weights() twice (two return addresses, two stacks), each keeping
 * 8 MiB; a report row for each read the same "alloc_weights (...) < main
 * < _start" twice (issue 15). */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void *alloc_weights(size_t n) {
	void *p = malloc(n);
	memset(p, 1, n);
	return p;
}

int main(void) {
	void *a = alloc_weights(8 << 20);
	void *b = alloc_weights(8 << 20);
	return a == b;
}
