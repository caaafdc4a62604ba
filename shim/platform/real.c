/*
 * real.c — the functions the hooks forward to, and dlsym's bootstrap pool
 * (real.h).
 */
#include "platform/real.h"
#include "platform/dl.h"
#include "platform/buf.h"
#include <dlfcn.h>

struct mt_real mt_real;
int mt_real_resolving;

/* dlsym's own allocations before the real calloc is known (heaptrack's
 * DummyPool).  Bump allocation, never reused, never handed to real free. */
char mt_real_pool[MT_REAL_POOL] __attribute__((aligned(64)));
static size_t pool_used;

void *
mt_real_pool_alloc(size_t n, size_t align) {
	if (align < 16)
		align = 16;
	size_t at = (__atomic_load_n(&pool_used, __ATOMIC_RELAXED) + align - 1) &
		    ~(align - 1);
	for (;;) {
		size_t cur = __atomic_load_n(&pool_used, __ATOMIC_RELAXED);
		at = (cur + align - 1) & ~(align - 1);
		if (at + n > sizeof mt_real_pool)
			return NULL;
		if (__atomic_compare_exchange_n(&pool_used, &cur, at + n, 0,
						__ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return mt_real_pool + at; /* static storage is zeroed */
	}
}

void
mt_real_resolve(void) {
	if (mt_real_resolving)
		return;
	mt_real_resolving = 1;
#define R(name) *(void **)&mt_real.name = mt_dlsym(RTLD_NEXT, #name)
	R(malloc);
	R(calloc);
	R(realloc);
	R(reallocarray);
	R(free);
	R(posix_memalign);
	R(aligned_alloc);
	R(memalign);
	R(valloc);
	R(pvalloc);
	R(mmap);
	R(mmap64);
	R(munmap);
	R(mremap);
	R(mprotect);
#undef R
	if (!mt_real.malloc || !mt_real.free || !mt_real.calloc || !mt_real.realloc) {
		/* Nothing sensible can run without an allocator. */
		/* a message only, written with write(2): no stdio here */
		static const char msg[] = "memtally: fatal: cannot find the real "
					  "malloc (dlsym RTLD_NEXT failed)\n";
		mt_write_all(2, msg, sizeof msg - 1);
		__builtin_trap();
	}
	mt_real_resolving = 0;
}

uintptr_t
mt_real_pool_end(void) {
	return (uintptr_t)mt_real_pool + __atomic_load_n(&pool_used, __ATOMIC_RELAXED);
}
