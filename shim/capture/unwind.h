/*
 * unwind.h — capture the calling thread's return addresses.
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  The caller holds the re-entry guard, so allocations that libunwind
 * makes on first use (its own mmap'd pools) pass straight through.
 */
#ifndef MT_UNWIND_H
#define MT_UNWIND_H
#include "platform/glue.h"
#include "capture/cfi.h"
#include <stdint.h>

/* Record our own text range so frames inside the shim are dropped, and
 * the dynamic loader's (AT_BASE) for mt_unwind_loader_cut; sym (the real
 * dlsym) finds what the CFI walker needs (mt_cfi_init). */
void mt_unwind_init(void *(*sym)(void *, const char *));
/* After a dlclose: what the walkers cached per code address goes.
 * Async-signal-safe; sets no errno. */
void mt_unwind_unloaded(void);
/* The walkers (MEMTALLY_UNWIND): libunwind's unw_backtrace; frame
 * pointers, bounds-checked against the current stack; the shim's own CFI
 * walker (cfi.h), which hands a stack it cannot follow to libunwind. */
enum { MT_UNWIND_LIBUNWIND = 0, MT_UNWIND_FP = 1, MT_UNWIND_CFI = 2 };
/* Fill pcs[0..max) with return addresses, innermost first, frames of the
 * shim itself removed, walked as `how` says.  Returns the count.  The
 * stack ends after its first frame in stop_lo < pc <= stop_hi (both 0: no
 * such frame; under Python, the eval loop: mt_py_cut_range): the CFI
 * walker stops there, the others' stacks are cut there.  hook: the frame pointer of the shim's
 * exported hook the capture runs under (0: none); the CFI walker starts
 * at its caller.  Keeps errno.  Never allocates. */
int mt_unwind(uintptr_t *pcs, int max, int how, uintptr_t stop_lo, uintptr_t stop_hi,
	      uintptr_t hook);

/* A capture from hook that the CFI walker made before and would make
 * again the same (cfi.h mt_cfi_recall: the same start and stack words,
 * rule generation and tag; max is the configured depth and the stop range
 * the one tag's Python stack implies, as for every capture kept): 1 and
 * the id mt_unwind_keep kept for it, else 0 (then mt_unwind, and
 * mt_unwind_keep with what it became).  tag: what else the id depends on
 * (the stack's key and Python stack).  In the checking build
 * (MT_CFI_CHECK) always 0: every capture walks, and mt_unwind_keep checks
 * what the recall would have given. */
#ifdef MT_CFI_CHECK
int mt_unwind_recall(uintptr_t hook, int how, uint64_t tag, uint32_t *id);
#else
/* the calling thread's stack mapping (unwind.c), as last found; once
 * found, the walker's tables are there (cfi.h mt_cfi_me: made first) */
extern MT_TLS uintptr_t mt_stk_lo, mt_stk_hi;
static inline int
mt_unwind_recall(uintptr_t hook, int how, uint64_t tag, uint32_t *id) {
	uintptr_t sp = hook + 16;
	if (how != MT_UNWIND_CFI || !hook || sp < mt_stk_lo || sp >= mt_stk_hi)
		return 0;
	return mt_cfi_recall(hook, tag, id);
}
#endif
/* After mt_unwind, the id its stack was interned as (0: keep nothing,
 * e.g. the table was full): kept for mt_unwind_recall when the walk was
 * the CFI walker's from a hook. */
void mt_unwind_keep(uint64_t tag, uint32_t id);
/* Captures the CFI walker handed to libunwind (mt_cfi_handed). */
uint64_t mt_unwind_fallbacks(void);
/* Bytes the walkers keep (the CFI walker's rule table in use). */
uint64_t mt_unwind_memory(void);

/* Frames inside a library initializer that the dynamic loader runs
 * (constructors at start and at dlopen, destructors at exit): when more
 * than keep frames lie between pcs[0] and the initializer's own frame
 * (the one the loader called), the innermost keep stay, MT_PC_ELIDED
 * stands for the rest, and the initializer's frame and everything
 * outside it follow.  Returns the new count; keep 0 leaves pcs alone.
 * Under PyTorch's import, libtorch's initializers register operators
 * through deep, ever different call chains: 561 k of the process's
 * 700 k stacks, 83 k once cut at 4.  Never allocates. */
int mt_unwind_loader_cut(uintptr_t *pcs, int n, int keep);

/* A stack deeper than MEMTALLY_DEPTH keeps both ends: pcs holds the n
 * frames of a walk that went on past the depth (to MT_MAX_DEPTH), whole
 * when it reached the stack's end (its outermost frame, or the stop
 * frame); then the innermost three quarters of depth stay, MT_PC_DEEP + k
 * stands for the k frames between, and the outermost quarter follows
 * (rows keep both the allocating code and the program's own outer
 * frames: main, a thread's start, the call from Python).  A walk that
 * did not end keeps its innermost depth frames, as before.  Returns the
 * count (at most depth).  Never allocates. */
int mt_unwind_deep_cut(uintptr_t *pcs, int n, int depth, int whole);

/* The loader's lock at fork.  libunwind finds unwind tables through
 * dl_iterate_phdr, which holds the loader's lock around its callback; a
 * fork while another thread holds it leaves it held in the child for good,
 * and every capture there waits on it (a CI run of test_stress: a child
 * hung in unw_backtrace, its writer in dl_iterate_phdr).  The shim's own
 * callers that hold no lock of the shim go through this gate; fork closes
 * it first (mt_loader_prefork waits until no thread is inside and keeps
 * new ones out until mt_loader_postfork).  Async-signal-safe; never
 * allocates.  Callers holding a shim lock must not enter: fork takes those
 * after closing the gate. */
void mt_loader_enter(void);
void mt_loader_leave(void);
void mt_loader_prefork(void);
void mt_loader_postfork(int child);

#endif
