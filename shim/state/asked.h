/*
 * asked.h — what mmap and mremap calls asked for, where it is less than
 * what they mapped: per call site (stack and kind), the bytes the page
 * rounding added to the lengths asked (a site's alloc_bytes counts whole
 * pages: mmap(2048) maps 4096), so the file gives both (doc/FORMAT.md
 * asked_bytes).  State layer: calls only the platform.
 * Rules: never calls malloc; lock-free, any thread, in a signal or a
 * death: a table of fixed size (4,096 sites) with relaxed atomics; a
 * site that finds it full is left out (the file then gives no asked
 * figure for it).
 */
#ifndef MT_ASKED_H
#define MT_ASKED_H
#include <stdint.h>

/* A call of site (stack, kind) asked for rounding bytes less than it
 * mapped (rounding > 0). */
void mt_asked_note(uint32_t stack, int kind, uint64_t rounding);
/* The rounding bytes noted for (stack, kind) into *out: 1, or 0 when none
 * was. */
int mt_asked_get(uint32_t stack, int kind, uint64_t *out);

#endif
