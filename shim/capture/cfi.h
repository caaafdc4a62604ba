/*
 * cfi.h — the shim's own stack walker: call frame information read from
 * each object's .eh_frame (found by _dl_find_object), one rule per return
 * address cached in a lock-free table, for x86-64.  What it cannot follow
 * exactly (signal frames, CFA expressions, code outside any loaded object)
 * it reports, and the caller walks that stack with libunwind instead.
 * Rules: never calls malloc; takes no lock; reads only the calling
 * thread's stack, between its own frame and the mapping's top.  Async-signal-safe.
 */
#ifndef MT_CFI_H
#define MT_CFI_H
#include <stdint.h>

/* sym: the real dlsym (finds _dl_find_object, glibc 2.35 and later).
 * 1 when the walker can run; 0 leaves every capture to libunwind.
 * Maps the rule table (2 MiB, its pages touched as it fills).  From the constructor. */
int mt_cfi_init(void *(*sym)(void *, const char *));
/* Return addresses of the caller's frames, innermost first, up to max
 * and up to the first in stop_lo < pc <= stop_hi (0, 0: none); -1 when a
 * frame needs what this walker does not read (the caller then unwinds
 * with libunwind).  hi: the top of the calling thread's stack mapping;
 * nothing at or above it is read.  from: 0, or the frame pointer of a
 * live standard frame further out (saved rbp, then the return address):
 * the walk starts at its return address, the frames between left out.
 * Never allocates. */
int mt_cfi_walk(uintptr_t *pcs, int max, uintptr_t hi, uintptr_t stop_lo, uintptr_t stop_hi,
		uintptr_t from);
/* Recall (cfi.c): the id a capture from `from` (as mt_cfi_walk's) found
 * last time, kept by mt_cfi_keep, when this walk would read the same
 * stack words from the same start under the same hi, stop range, max,
 * rule generation and caller's tag: 1 and *id, else 0.  Reads only words
 * the kept walk read, between from and hi.  Never allocates. */
int mt_cfi_recall(uintptr_t from, uintptr_t hi, uintptr_t stop_lo, uintptr_t stop_hi, int max,
		  uint64_t tag, uint32_t *id);
/* Keep id (with tag) as what the calling thread's last walk, one from a
 * caller recorded whole, ends as.  Only right after that walk. */
void mt_cfi_keep(uint64_t tag, uint32_t id);
/* After dlclose: every cached rule is forgotten (an object loaded at the
 * same address must not be walked by the unloaded one's rules). */
void mt_cfi_forget(void);
/* Walks that met a frame the walker does not read (a signal frame, code
 * outside any loaded object, a rule outside its forms) and returned -1. */
uint64_t mt_cfi_handed(void);
/* Bytes of the rule table in use (its pages that hold a rule). */
uint64_t mt_cfi_memory(void);

#endif
