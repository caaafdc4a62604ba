/*
 * unwind.h — capture the calling thread's return addresses.
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  The caller holds the re-entry guard, so allocations that libunwind
 * makes on first use (its own mmap'd pools) pass straight through.
 */
#ifndef MT_UNWIND_H
#define MT_UNWIND_H
#include <stdint.h>

/* Record our own text range so frames inside the shim are dropped. */
void mt_unwind_init(void);
/* Fill pcs[0..max) with return addresses, innermost first, frames of the
 * shim itself removed.  fp != 0 walks frame pointers (bounds-checked against
 * the current stack), else libunwind's unw_backtrace.  Returns the count.
 * Never allocates. */
int mt_unwind(uintptr_t *pcs, int max, int fp);

#endif
