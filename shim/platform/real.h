/*
 * real.h — what the hooks forward to: the C library's allocator and
 * mapping functions, found with dlsym(RTLD_NEXT) (dl.h) on the first
 * hook's call or at start (entry/interpose.c mt_hooks_resolve), and the
 * bootstrap pool that serves dlsym's own allocations while they are being
 * found (heaptrack's DummyPool): bump allocation, never reused, never
 * handed to the real free.
 * Rules: never calls malloc; safe before the constructor and inside
 * dlsym: a hook reached while the lookup runs sees mt_real_resolving set,
 * must not ask again, and takes its memory from the pool (or, for a
 * mapping, from the kernel directly).  The hooks' assembly fast paths
 * call through mt_real by symbol and offset (interpose.c's asserts).
 */
#ifndef MT_REAL_H
#define MT_REAL_H
#include "platform/glue.h"
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct mt_real {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	void *(*mmap64)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	void *(*mremap)(void *, size_t, size_t, int, ...);
	int (*mprotect)(void *, size_t, int);
};
extern MT_HIDDEN struct mt_real mt_real;
/* Set while mt_real_resolve's lookups run (a hook reached then must not
 * resolve again). */
extern MT_HIDDEN int mt_real_resolving;
/* Every function of mt_real, at once; traps (after a message on stderr)
 * where there is no real malloc, free, calloc or realloc. */
MT_NOINLINE void mt_real_resolve(void);

#define MT_REAL_POOL (64 << 10)
extern MT_HIDDEN char mt_real_pool[MT_REAL_POOL];
/* n bytes of the pool at align (16 at least), or NULL when it is spent. */
void *mt_real_pool_alloc(size_t n, size_t align);
/* Where the pool's handed-out part ends. */
uintptr_t mt_real_pool_end(void);
static inline int
mt_real_in_pool(const void *p) {
	return (uintptr_t)p - (uintptr_t)mt_real_pool < MT_REAL_POOL;
}

#endif
