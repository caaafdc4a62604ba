/* fakecuda.c — a fake libcuda.so.1 for tests on machines without a GPU.
 *
 * Device memory is bookkeeping only: addresses come from a bump allocator
 * in a range no host mapping uses and are never dereferenced; capacity is
 * FAKE_CUDA_MEM bytes (default 1 GiB) per device, FAKE_CUDA_DEVICES
 * devices (default 2).  Allocations past capacity return
 * CUDA_ERROR_OUT_OF_MEMORY.  cuGetProcAddress[_v2] resolves (symbol,
 * cudaVersion, flags) to the ABI variant as the real driver does (the _v2
 * ABI from 3020, _ptsz with the per-thread-stream flag).  fakecuda_used()
 * reports the fake's own accounting, for tests to compare with memtally's.
 *
 * Link with -Wl,-Bsymbolic: without it the name table below would resolve
 * through the GOT to the shim's exports and the tests would pass for the
 * wrong reason. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUhandle;
typedef void *CUstream;
#define OK 0
#define INVALID_VALUE 1
#define OOM 2
#define NOT_FOUND 500

#define MAXDEV 8
#define MAXALLOC 200000
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t capacity, used[MAXDEV], next_addr[MAXDEV];
static int ndev = 2;
static __thread int cur_dev;
struct alloc { uint64_t key; uint64_t size; int dev; int host; };
static struct alloc allocs[MAXALLOC];
static int nallocs;
static uint64_t next_handle = 0x1000;

static void init(void) {
	if (capacity)
		return;
	const char *m = getenv("FAKE_CUDA_MEM"), *d = getenv("FAKE_CUDA_DEVICES");
	capacity = m ? strtoull(m, NULL, 0) : (1ull << 30);
	ndev = d ? atoi(d) : 2;
	if (ndev < 1 || ndev > MAXDEV)
		ndev = 2;
	for (int i = 0; i < MAXDEV; i++)
		next_addr[i] = 0x100000000000ull + (uint64_t)i * 0x10000000000ull;
}

/* Reserve n bytes on dev; 0 or OOM.  host: pinned host memory (not counted
 * against the device).  key: the address or handle to free by. */
static CUresult take(void *keyp, uint64_t n, int dev, int host, int handle) {
	uint64_t *key = keyp;
	pthread_mutex_lock(&mu);
	init();
	if (dev < 0 || dev >= ndev || nallocs >= MAXALLOC) {
		pthread_mutex_unlock(&mu);
		return INVALID_VALUE;
	}
	if (!host && used[dev] + n > capacity) {
		pthread_mutex_unlock(&mu);
		return OOM;
	}
	if (handle) {
		*key = next_handle++;
	} else {
		*key = next_addr[dev];
		next_addr[dev] += (n + 511) & ~511ull;
	}
	if (!host)
		used[dev] += n;
	allocs[nallocs++] = (struct alloc){*key, n, dev, host};
	pthread_mutex_unlock(&mu);
	return OK;
}

static CUresult give(uint64_t key) {
	pthread_mutex_lock(&mu);
	for (int i = nallocs - 1; i >= 0; i--) {
		if (allocs[i].key != key)
			continue;
		if (!allocs[i].host)
			used[allocs[i].dev] -= allocs[i].size;
		allocs[i] = allocs[--nallocs];
		pthread_mutex_unlock(&mu);
		return OK;
	}
	pthread_mutex_unlock(&mu);
	return INVALID_VALUE;
}

uint64_t fakecuda_used(int dev);
uint64_t fakecuda_used(int dev) {
	pthread_mutex_lock(&mu);
	uint64_t u = dev >= 0 && dev < MAXDEV ? used[dev] : 0;
	pthread_mutex_unlock(&mu);
	return u;
}

#define API(name, ...) CUresult name(__VA_ARGS__); CUresult name(__VA_ARGS__)
API(cuInit, unsigned f) { (void)f; pthread_mutex_lock(&mu); init(); pthread_mutex_unlock(&mu); return OK; }
API(cuDeviceGetCount, int *n) { init(); *n = ndev; return OK; }
API(cuDeviceGet, int *d, int ord) { *d = ord; return OK; }
API(cuCtxCreate_v4, void **ctx, void *params, unsigned f, int dev) { (void)params; (void)f; cur_dev = dev; *ctx = (void *)(uintptr_t)(dev + 1); return OK; }
API(cuCtxSetCurrent, void *ctx) { cur_dev = ctx ? (int)(uintptr_t)ctx - 1 : 0; return OK; }
API(cuCtxGetDevice, int *d) { *d = cur_dev; return OK; }
API(cuMemGetInfo_v2, size_t *fr, size_t *tot) {
	pthread_mutex_lock(&mu); init();
	*tot = capacity; *fr = capacity - used[cur_dev];
	pthread_mutex_unlock(&mu); return OK;
}
API(cuMemAlloc_v2, CUdeviceptr *p, size_t n) { return take(p, n, cur_dev, 0, 0); }
API(cuMemAlloc, unsigned *p, unsigned n) { (void)p; (void)n; return NOT_FOUND; } /* v1 ABI */
API(cuMemAllocPitch_v2, CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned el) {
	(void)el; *pitch = (w + 511) & ~(size_t)511; return take(p, *pitch * h, cur_dev, 0, 0);
}
API(cuMemAllocManaged, CUdeviceptr *p, size_t n, unsigned f) { (void)f; return take(p, n, cur_dev, 0, 0); }
API(cuMemFree_v2, CUdeviceptr p) { return give(p); }
API(cuMemAllocAsync, CUdeviceptr *p, size_t n, CUstream s) { (void)s; return take(p, n, cur_dev, 0, 0); }
static uint64_t ptsz_calls;
uint64_t fakecuda_ptsz_calls(void);
uint64_t fakecuda_ptsz_calls(void) { return __atomic_load_n(&ptsz_calls, __ATOMIC_RELAXED); }
API(cuMemAllocAsync_ptsz, CUdeviceptr *p, size_t n, CUstream s) { (void)s; __atomic_add_fetch(&ptsz_calls, 1, __ATOMIC_RELAXED); return take(p, n, cur_dev, 0, 0); }
API(cuMemAllocFromPoolAsync, CUdeviceptr *p, size_t n, void *pool, CUstream s) { (void)pool; (void)s; return take(p, n, cur_dev, 0, 0); }
API(cuMemAllocFromPoolAsync_ptsz, CUdeviceptr *p, size_t n, void *pool, CUstream s) { (void)pool; (void)s; return take(p, n, cur_dev, 0, 0); }
API(cuMemFreeAsync, CUdeviceptr p, CUstream s) { (void)s; return give(p); }
API(cuMemFreeAsync_ptsz, CUdeviceptr p, CUstream s) { (void)s; __atomic_add_fetch(&ptsz_calls, 1, __ATOMIC_RELAXED); return give(p); }
API(cuMemHostAlloc, void **pp, size_t n, unsigned f) {
	(void)f; void *m = malloc(n ? n : 1); /* real host memory, as the driver's */
	if (!m) return OOM;
	pthread_mutex_lock(&mu); init();
	allocs[nallocs++] = (struct alloc){(uintptr_t)m, n, cur_dev, 1};
	pthread_mutex_unlock(&mu);
	*pp = m; return OK;
}
API(cuMemAllocHost_v2, void **pp, size_t n) { return cuMemHostAlloc(pp, n, 0); }
API(cuMemFreeHost, void *p) { CUresult r = give((uintptr_t)p); if (r == OK) free(p); return r; }
API(cuMemCreate, CUhandle *h, size_t n, const void *prop, unsigned long long f) {
	(void)f; const int *loc = (const int *)prop + 2;
	return take(h, n, loc[0] == 1 ? loc[1] : 0, loc[0] != 1, 1);
}
API(cuMemRelease, CUhandle h) { return give(h); }
API(cuMemAddressReserve, CUdeviceptr *p, size_t n, size_t a, CUdeviceptr addr, unsigned long long f) {
	(void)a; (void)addr; (void)f; pthread_mutex_lock(&mu); init();
	*p = next_addr[MAXDEV - 1]; next_addr[MAXDEV - 1] += n; pthread_mutex_unlock(&mu); return OK;
}
API(cuMemAddressFree, CUdeviceptr p, size_t n) { (void)p; (void)n; return OK; }
API(cuMemMap, CUdeviceptr p, size_t n, size_t off, CUhandle h, unsigned long long f) { (void)p; (void)n; (void)off; (void)h; (void)f; return OK; }
API(cuMemUnmap, CUdeviceptr p, size_t n) { (void)p; (void)n; return OK; }
API(cuMemSetAccess, CUdeviceptr p, size_t n, const void *d, size_t c) { (void)p; (void)n; (void)d; (void)c; return OK; }
API(cuArrayCreate_v2, void **arr, const void *desc) {
	const size_t *wh = desc; const int *fc = (const int *)(wh + 2);
	uint64_t k; CUresult r = take(&k, wh[0] * (wh[1] ? wh[1] : 1) * (uint64_t)fc[1] * 4, cur_dev, 0, 1);
	*arr = (void *)(uintptr_t)k; return r;
}
API(cuArrayDestroy, void *arr) { return give((uintptr_t)arr); }

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

/* (base name, first version, per-thread variant?, the variant) */
static const struct { const char *base; int ver; int pt; const char *name; void *fn; } syms[] = {
#define S(b, v, p, n) {b, v, p, #n, (void *)n}
	S("cuInit", 2000, 0, cuInit), S("cuDeviceGetCount", 2000, 0, cuDeviceGetCount),
	S("cuDeviceGet", 2000, 0, cuDeviceGet), S("cuCtxCreate", 12050, 0, cuCtxCreate_v4),
	S("cuCtxSetCurrent", 4000, 0, cuCtxSetCurrent), S("cuCtxGetDevice", 2000, 0, cuCtxGetDevice),
	S("cuMemGetInfo", 3020, 0, cuMemGetInfo_v2), S("cuMemAlloc", 2000, 0, cuMemAlloc),
	S("cuMemAlloc", 3020, 0, cuMemAlloc_v2), S("cuMemAllocPitch", 3020, 0, cuMemAllocPitch_v2),
	S("cuMemAllocManaged", 6000, 0, cuMemAllocManaged), S("cuMemFree", 3020, 0, cuMemFree_v2),
	S("cuMemAllocAsync", 11020, 0, cuMemAllocAsync), S("cuMemAllocAsync", 11020, 1, cuMemAllocAsync_ptsz),
	S("cuMemAllocFromPoolAsync", 11020, 0, cuMemAllocFromPoolAsync),
	S("cuMemAllocFromPoolAsync", 11020, 1, cuMemAllocFromPoolAsync_ptsz),
	S("cuMemFreeAsync", 11020, 0, cuMemFreeAsync), S("cuMemFreeAsync", 11020, 1, cuMemFreeAsync_ptsz),
	S("cuMemHostAlloc", 2020, 0, cuMemHostAlloc), S("cuMemAllocHost", 3020, 0, cuMemAllocHost_v2),
	S("cuMemFreeHost", 2000, 0, cuMemFreeHost), S("cuMemCreate", 10020, 0, cuMemCreate),
	S("cuMemRelease", 10020, 0, cuMemRelease), S("cuMemAddressReserve", 10020, 0, cuMemAddressReserve),
	S("cuMemAddressFree", 10020, 0, cuMemAddressFree), S("cuMemMap", 10020, 0, cuMemMap),
	S("cuMemUnmap", 10020, 0, cuMemUnmap), S("cuMemSetAccess", 10020, 0, cuMemSetAccess),
	S("cuArrayCreate", 3020, 0, cuArrayCreate_v2), S("cuArrayDestroy", 2000, 0, cuArrayDestroy),
	S("cuGetProcAddress", 11030, 0, cuGetProcAddress), S("cuGetProcAddress", 12000, 0, cuGetProcAddress_v2),
#undef S
};

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
	void *best = NULL;
	int bestver = -1, pt = (flags & 2) != 0;
	for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
		if (strcmp(syms[i].base, sym) || syms[i].ver > ver)
			continue;
		int has_pt = 0;
		for (size_t k = 0; k < sizeof syms / sizeof *syms; k++)
			has_pt |= !strcmp(syms[k].base, sym) && syms[k].pt;
		if (syms[i].pt != (pt && has_pt))
			continue;
		if (syms[i].ver > bestver)
			best = syms[i].fn, bestver = syms[i].ver;
	}
	*pfn = best;
	if (status)
		*status = best ? 0 : 1;
	return best ? OK : NOT_FOUND;
}

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
	return cuGetProcAddress_v2(sym, pfn, ver, flags, NULL);
}
