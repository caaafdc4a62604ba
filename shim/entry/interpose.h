/*
 * interpose.h — what the lifecycle asks of the heap and mmap hooks.
 */
#ifndef MT_INTERPOSE_H
#define MT_INTERPOSE_H

/* Resolve the real allocator now (the hooks otherwise do it on their
 * first call): before hooks record, since the sampling fast path
 * (mt_fast_below, charge.h) calls it without looking.  Never allocates
 * but through dlsym's bootstrap pool. */
void mt_hooks_resolve(void);

#endif
