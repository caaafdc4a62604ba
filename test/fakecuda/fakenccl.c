/* fakenccl.c — built as libnccl.so.2: a library outside PyTorch that takes
 * device memory from the driver itself, as NCCL does for its buffers, so
 * `memtally oom` has an allocation to name as NCCL's (by its module).
 * fake_nccl_buffers(n, dev): n bytes on dev through libcuda's
 * cuMemAlloc_v2 (dlopen + dlsym, as NCCL finds the driver); 0 or the
 * driver's error. */
#include <dlfcn.h>
#include <stddef.h>

typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*ctx_fn)(void **, void *, unsigned, int);

int fake_nccl_buffers(size_t n, int dev);
int
fake_nccl_buffers(size_t n, int dev) {
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	if (!cu)
		return 999;
	alloc_fn alloc = (alloc_fn)dlsym(cu, "cuMemAlloc_v2");
	ctx_fn ctx = (ctx_fn)dlsym(cu, "cuCtxCreate_v4");
	void *c;
	if (!alloc || !ctx || ctx(&c, NULL, 0, dev))
		return 998;
	unsigned long long p;
	return alloc(&p, n);
}
