/* cuda_prog — drives the fake driver the way real callers reach a driver.
 * argv[1] picks the route:
 *   direct  calls the entry points it was linked against (-lcuda; the
 *           binary cuda_direct)
 *   dlsym   dlopen("libcuda.so.1", RTLD_LOCAL) + dlsym(handle, "..._v2"),
 *           the async ones as "cuMemAllocAsync_ptsz" (JAX/XLA, old PyTorch)
 *   gpa     dlsym(handle, "cuGetProcAddress") then lookups at 12000, the
 *           async ones with the per-thread-stream flag
 *   rt      cudart 13's exact sequence: dlsym(handle,
 *           "cuGetProcAddress_v2"), the self-lookup "cuGetProcAddress" at
 *           12000, then every lookup through the pointer it returned, with
 *           flags 0 and 2
 * argv[2] picks the work: "mix" (known allocations from known functions),
 * "gpus" (one call site on two devices, their peaks apart), "vmm"
 * (expandable segments), "mt" (8 threads x 2000 async pairs with the
 * per-thread flag), "oom" (allocate until out of memory, check the dump is
 * on disk, free some and retry; argv[3] is the output directory).
 * Prints a JSON line with what the fake driver itself counted. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr, CUhandle;
typedef void *CUstream;

#define FNS(X)                                                                 \
	X(cuInit, "cuInit", 2000, CUresult (*)(unsigned))                      \
	X(cuCtxCreate_v4, "cuCtxCreate", 12050, CUresult (*)(void **, void *, unsigned, int)) \
	X(cuCtxSetCurrent, "cuCtxSetCurrent", 4000, CUresult (*)(void *))      \
	X(cuMemAlloc_v2, "cuMemAlloc", 3020, CUresult (*)(CUdeviceptr *, size_t)) \
	X(cuMemFree_v2, "cuMemFree", 3020, CUresult (*)(CUdeviceptr))          \
	X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, CUresult (*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned)) \
	X(cuMemAllocManaged, "cuMemAllocManaged", 6000, CUresult (*)(CUdeviceptr *, size_t, unsigned)) \
	X(cuMemHostAlloc, "cuMemHostAlloc", 2020, CUresult (*)(void **, size_t, unsigned)) \
	X(cuMemFreeHost, "cuMemFreeHost", 2000, CUresult (*)(void *))          \
	X(cuArrayCreate_v2, "cuArrayCreate", 3020, CUresult (*)(void **, const void *)) \
	X(cuArrayDestroy, "cuArrayDestroy", 2000, CUresult (*)(void *))        \
	X(cuMemCreate, "cuMemCreate", 10020, CUresult (*)(CUhandle *, size_t, const void *, unsigned long long)) \
	X(cuMemRelease, "cuMemRelease", 10020, CUresult (*)(CUhandle))         \
	X(cuMemAddressReserve, "cuMemAddressReserve", 10020, CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)) \
	X(cuMemAddressFree, "cuMemAddressFree", 10020, CUresult (*)(CUdeviceptr, size_t)) \
	X(cuMemMap, "cuMemMap", 10020, CUresult (*)(CUdeviceptr, size_t, size_t, CUhandle, unsigned long long)) \
	X(cuMemUnmap, "cuMemUnmap", 10020, CUresult (*)(CUdeviceptr, size_t))  \
	X(cuMemSetAccess, "cuMemSetAccess", 10020, CUresult (*)(CUdeviceptr, size_t, const void *, size_t))

#define DECL(sym, base, ver, type) static __typeof__(type) p_##sym;
FNS(DECL)
/* The async ones: the per-thread-stream variants, as
 * -DCUDA_API_PER_THREAD_DEFAULT_STREAM programs call them. */
static CUresult (*p_alloc_async)(CUdeviceptr *, size_t, CUstream);
static CUresult (*p_free_async)(CUdeviceptr, CUstream);
static uint64_t (*fake_used)(int);
static uint64_t (*fake_ptsz)(void);

#ifdef DIRECT
#define PROTO(sym, base, ver, type) CUresult sym();
FNS(PROTO)
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
uint64_t fakecuda_used(int);
uint64_t fakecuda_ptsz_calls(void);
static void bind(const char *route) {
	(void)route;
#define TAKE(sym, base, ver, type) p_##sym = (type)sym;
	FNS(TAKE)
	p_alloc_async = cuMemAllocAsync_ptsz;
	p_free_async = cuMemFreeAsync_ptsz;
	fake_used = fakecuda_used;
	fake_ptsz = fakecuda_ptsz_calls;
}
#else
typedef CUresult (*gpa1_t)(const char *, void **, int, unsigned long long);
typedef CUresult (*gpa2_t)(const char *, void **, int, unsigned long long, int *);
static void bind(const char *route) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		exit(20);
	}
	fake_used = (uint64_t (*)(int))dlsym(h, "fakecuda_used");
	fake_ptsz = (uint64_t (*)(void))dlsym(h, "fakecuda_ptsz_calls");
	if (!strcmp(route, "dlsym")) {
#define DL(sym, base, ver, type) p_##sym = (type)dlsym(h, #sym);
		FNS(DL)
		p_alloc_async = (CUresult (*)(CUdeviceptr *, size_t, CUstream))dlsym(h, "cuMemAllocAsync_ptsz");
		p_free_async = (CUresult (*)(CUdeviceptr, CUstream))dlsym(h, "cuMemFreeAsync_ptsz");
		return;
	}
	gpa2_t gpa2 = NULL;
	gpa1_t gpa1 = NULL;
	if (!strcmp(route, "gpa")) {
		gpa1 = (gpa1_t)dlsym(h, "cuGetProcAddress");
	} else { /* rt: cudart's sequence */
		gpa2_t first = (gpa2_t)dlsym(h, "cuGetProcAddress_v2");
		int st = -1;
		if (!first || first("cuGetProcAddress", (void **)&gpa2, 12000, 0, &st) || st)
			exit(21);
	}
#define GP(sym, base, ver, type)                                               \
	if (gpa2) gpa2(base, (void **)&p_##sym, ver, 0, NULL);                 \
	else gpa1(base, (void **)&p_##sym, ver, 0);
	FNS(GP)
	if (gpa2) {
		gpa2("cuMemAllocAsync", (void **)&p_alloc_async, 11020, 2, NULL);
		gpa2("cuMemFreeAsync", (void **)&p_free_async, 11020, 2, NULL);
	} else {
		gpa1("cuMemAllocAsync", (void **)&p_alloc_async, 11020, 2);
		gpa1("cuMemFreeAsync", (void **)&p_free_async, 11020, 2);
	}
}
#endif

#define CK(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "%s: %d\n", #x, r_); exit(30); } } while (0)
#define MIB (1ull << 20)
#define NOINLINE __attribute__((noinline))

static CUdeviceptr keep[64];
NOINLINE static void dev_alloc(void) {        /* 10 x 1 MiB, 4 freed: 6 MiB */
	for (int i = 0; i < 10; i++)
		CK(p_cuMemAlloc_v2(&keep[i], MIB));
	for (int i = 0; i < 4; i++)
		CK(p_cuMemFree_v2(keep[i]));
}
NOINLINE static void async_alloc(void) {      /* 5 x 512 KiB on a stream, 1 freed: 2 MiB */
	CUdeviceptr d[5];
	for (int i = 0; i < 5; i++)
		CK(p_alloc_async(&d[i], 512 << 10, (CUstream)0x1234));
	CK(p_free_async(d[0], (CUstream)0x1234));
}
NOINLINE static void pinned_alloc(void) {     /* 3 x 64 KiB pinned host */
	void *h;
	for (int i = 0; i < 3; i++)
		CK(p_cuMemHostAlloc(&h, 64 << 10, 0));
}
NOINLINE static void managed_alloc(void) {    /* 2 x 2 MiB managed */
	CUdeviceptr d;
	for (int i = 0; i < 2; i++)
		CK(p_cuMemAllocManaged(&d, 2 * MIB, 1));
}
NOINLINE static void pitch_alloc(void) {      /* 1000 x 100 at pitch 1024: 102400 */
	CUdeviceptr d;
	size_t pitch;
	CK(p_cuMemAllocPitch_v2(&d, &pitch, 1000, 100, 4));
}
NOINLINE static void array_alloc(void) {      /* 256 x 256 float: 262144, then one destroyed */
	struct { size_t w, h; int fmt; unsigned ch; } desc = {256, 256, 0x20, 1};
	void *a, *b;
	CK(p_cuArrayCreate_v2(&a, &desc));
	CK(p_cuArrayCreate_v2(&b, &desc));
	CK(p_cuArrayDestroy(b));
}
NOINLINE static void dev1_alloc(void) {       /* device 1: 3 x 1 MiB */
	CUdeviceptr d;
	for (int i = 0; i < 3; i++)
		CK(p_cuMemAlloc_v2(&d, MIB));
}

/* PyTorch's expandable segments: reserve, then create + map + set access
 * in 2 MiB pieces as the segment grows; shrink by unmap + release. */
/* "gpus": one call site on two devices whose peaks fall at different
 * times.  Device 1: gpu_site 32 MiB and gpu_other 8 MiB (its peak, 40
 * MiB), then gpu_site's freed; device 0: gpu_site 64 MiB (the cuda kind's
 * peak, 72 MiB, when device 1 holds 8).  At device 1's peak gpu_site held
 * 32 MiB there; at the kind's peak, none. */
NOINLINE static CUdeviceptr gpu_site(size_t n) {
	CUdeviceptr d;
	CK(p_cuMemAlloc_v2(&d, n));
	return d;
}
NOINLINE static CUdeviceptr gpu_other(size_t n) {
	CUdeviceptr d;
	CK(p_cuMemAlloc_v2(&d, n));
	return d;
}
NOINLINE static void gpus(void *ctx0, void *ctx1) {
	for (int i = 0; i < 2; i++) { /* gpu_site's stack is the same both times */
		CK(p_cuCtxSetCurrent(i ? ctx0 : ctx1));
		CUdeviceptr d = gpu_site(i ? 64 * MIB : 32 * MIB);
		if (!i) {
			gpu_other(8 * MIB);
			CK(p_cuMemFree_v2(d));
		}
	}
}
NOINLINE static void vmm_grow(void) {         /* 3 x 2 MiB created, 1 released: 4 MiB */
	CUdeviceptr base;
	CUhandle h[3];
	int prop[8] = {0, 0, 1 /* DEVICE */, 0 /* device 0 */};
	CK(p_cuMemAddressReserve(&base, 64 * MIB, 0, 0, 0));
	for (int i = 0; i < 3; i++) {
		CK(p_cuMemCreate(&h[i], 2 * MIB, prop, 0));
		CK(p_cuMemMap(base + i * 2 * MIB, 2 * MIB, 0, h[i], 0));
		CK(p_cuMemSetAccess(base + i * 2 * MIB, 2 * MIB, prop, 1));
	}
	CK(p_cuMemUnmap(base + 4 * MIB, 2 * MIB));
	CK(p_cuMemRelease(h[2]));
}

static void *mt_worker(void *arg) {
	CUdeviceptr d, last = 0;
	CK(p_cuCtxSetCurrent(arg));
	for (int i = 0; i < 2000; i++) {
		CK(p_alloc_async(&d, 4096, NULL));
		if (last)
			CK(p_free_async(last, NULL));
		last = d;
	}
	return NULL; /* one 4096 B block left per thread */
}

NOINLINE static void small_blocks(int n) {    /* CUDA_PROG_SMALL=n: n x 4 KiB first */
	CUdeviceptr d;
	for (int i = 0; i < n; i++)
		CK(p_cuMemAlloc_v2(&d, 4096));
}

NOINLINE static CUresult big_block(CUdeviceptr *d) {
	return p_cuMemAlloc_v2(d, 64 * MIB);
}

static int dump_on_disk(const char *dir) {
	int n = 0;
	DIR *dd = opendir(dir);
	struct dirent *e;
	while (dd && (e = readdir(dd)))
		n += strstr(e->d_name, ".oom1.jsonl") != NULL;
	if (dd)
		closedir(dd);
	return n;
}

int main(int argc, char **argv) {
	const char *route = argc > 1 ? argv[1] : "direct", *work = argc > 2 ? argv[2] : "mix";
	bind(route);
	void *ctx0, *ctx1;
	CK(p_cuInit(0));
	CK(p_cuCtxCreate_v4(&ctx1, NULL, 0, 1));
	CK(p_cuCtxCreate_v4(&ctx0, NULL, 0, 0));
	if (!strcmp(work, "mix")) {
		dev_alloc();
		async_alloc();
		pinned_alloc();
		managed_alloc();
		pitch_alloc();
		array_alloc();
		CK(p_cuCtxSetCurrent(ctx1));
		dev1_alloc();
		CK(p_cuCtxSetCurrent(ctx0));
	} else if (!strcmp(work, "gpus")) {
		gpus(ctx0, ctx1);
	} else if (!strcmp(work, "vmm")) {
		vmm_grow();
	} else if (!strcmp(work, "mt")) {
		pthread_t t[8];
		for (int i = 0; i < 8; i++)
			pthread_create(&t[i], NULL, mt_worker, ctx0);
		for (int i = 0; i < 8; i++)
			pthread_join(t[i], NULL);
	} else if (!strcmp(work, "oom")) {
		CUdeviceptr d[64];
		int n = 0;
		CUresult r;
		if (getenv("CUDA_PROG_SMALL"))
			small_blocks(atoi(getenv("CUDA_PROG_SMALL")));
		struct timespec ta, tb;
		clock_gettime(CLOCK_MONOTONIC, &ta);
		while ((r = big_block(&d[n])) == 0) {
			n++;
			clock_gettime(CLOCK_MONOTONIC, &ta);
		}
		clock_gettime(CLOCK_MONOTONIC, &tb); /* the failing call, dump included */
		double oom_ms = (double)(tb.tv_sec - ta.tv_sec) * 1e3 + (double)(tb.tv_nsec - ta.tv_nsec) / 1e6;
		/* the error is here: is the dump complete on disk already? */
		int on_disk = argc > 3 ? dump_on_disk(argv[3]) : -1;
		uint64_t used_at_oom = fake_used(0);
		for (int i = 0; i < 4; i++) /* empty the cache and retry, as frameworks do */
			CK(p_cuMemFree_v2(d[--n]));
		CK(big_block(&d[n++]));
		printf("{\"error\":%d,\"blocks\":%d,\"dump_on_disk\":%d,\"used_at_oom\":%llu,"
		       "\"oom_call_ms\":%.3f,", r, n, on_disk, (unsigned long long)used_at_oom, oom_ms);
	}
	if (strcmp(work, "oom"))
		printf("{");
	printf("\"used0\":%llu,\"used1\":%llu,\"ptsz_calls\":%llu}\n",
	       (unsigned long long)fake_used(0), (unsigned long long)fake_used(1),
	       (unsigned long long)fake_ptsz());
	return 0;
}
