/* prog_tree — call sites that share their outer frames: main -> chain of
 * 12 nested calls (descend) -> 40 distinct leaves, each keeping
 * (i + 1) * 4096 bytes, called twice from two call sites in the innermost
 * level (80 stacks that differ only in their last one or two frames).
 * A file of format 3 stores the shared frames once (issue 14). */
#include <stdlib.h>
#include <string.h>

#define LEAF(i)                                                         \
	__attribute__((noinline)) static void *leaf##i(void) {          \
		void *p = malloc(((i) + 1) * 4096);                     \
		memset(p, i, ((i) + 1) * 4096);                         \
		__asm__ volatile("" ::: "memory");                      \
		return p;                                               \
	}
#define L4(a) LEAF(a##0) LEAF(a##1) LEAF(a##2) LEAF(a##3)
L4(1) L4(2) L4(3) L4(4) L4(5) L4(6) L4(7) L4(8) L4(9)
LEAF(100) LEAF(101) LEAF(102) LEAF(103)

typedef void *(*leaf_fn)(void);
static leaf_fn leaves[40] = {
	leaf10, leaf11, leaf12, leaf13, leaf20, leaf21, leaf22, leaf23, leaf30, leaf31,
	leaf32, leaf33, leaf40, leaf41, leaf42, leaf43, leaf50, leaf51, leaf52, leaf53,
	leaf60, leaf61, leaf62, leaf63, leaf70, leaf71, leaf72, leaf73, leaf80, leaf81,
	leaf82, leaf83, leaf90, leaf91, leaf92, leaf93, leaf100, leaf101, leaf102, leaf103,
};
static void *kept[80];

__attribute__((noinline)) static void bottom(void) {
	for (int i = 0; i < 40; i++)
		kept[i] = leaves[i]();
	__asm__ volatile("" ::: "memory");
	for (int i = 0; i < 40; i++)
		kept[40 + i] = leaves[i]();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void descend(int d) {
	if (d == 0)
		bottom();
	else
		descend(d - 1);
	__asm__ volatile("" ::: "memory");
}

int main(void) {
	descend(12);
	return kept[0] == kept[1];
}
