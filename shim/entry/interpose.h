/*
 * interpose.h — what the lifecycle asks of the heap and mmap hooks.
 *
 * THE ENTRY LAYER (entry/): every symbol the program calls into.
 *   interpose.c  malloc and friends
 *   mappings.c   mmap, munmap, mprotect, mremap; pipe2
 *   cuda.c       the CUDA driver's allocation functions
 *   signals.c    the snapshot signal; sigaction and signal for it
 *   api.c        the C API (memtally.h)
 *   exec.c       _exit, _Exit and the exec family
 * Each hook is safe from the first instruction (before the constructor,
 * inside dlsym, after the exit snapshot), forwards to the real function,
 * and makes its call into the capture or output layer under the re-entry
 * guard.  Entry points never call each other: two hooks share code only
 * through a lower layer.  Only the lifecycle calls into this layer.
 */
#ifndef MT_INTERPOSE_H
#define MT_INTERPOSE_H

/* Resolve the real allocator now (the hooks otherwise do it on their
 * first call): before hooks record, since the sampling fast path
 * (mt_fast_below, charge.h) calls it without looking.  Never allocates
 * but through dlsym's bootstrap pool. */
void mt_hooks_resolve(void);

#endif
