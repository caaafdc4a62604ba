/*
 * cudaroutes.h — the CUDA driver entry points the shim wraps: one row
 * each, their indices, the driver's (real) function for each, and how the
 * driver is asked for one.  The wrappers are entry/cuda.c's exports; this
 * layer never names them, so which pointer is the shim's own is the
 * caller's test (a real pointer is never one of them: cuda.c checks
 * before it calls mt_cuda_set_real).
 *
 * X(name, base, min_version, ptsz, parameter types...)
 *   name         the exact exported variant ("cuMemAllocAsync_ptsz")
 *   base         what cuGetProcAddress is asked for ("cuMemAllocAsync")
 *   min_version  the cudaVersion from which cuGetProcAddress hands out this
 *                ABI (0: any); a lower one passes the driver's answer on
 *   ptsz         1 for the per-thread default stream variant
 * Adding an entry point: a row here and its wrapper body in entry/cuda.c
 * (the index IX_<name>, the function type mt_cufn_<name>, the row of
 * mt_cuda_rows, the real pointer and cuda.c's declarations follow from
 * the row; a missing body fails the link).
 * Rules: never calls malloc itself (the lookups go to the loader, as
 * they did from cuda.c); may run in any thread, before the constructor.
 */
#ifndef MT_CUDAROUTES_H
#define MT_CUDAROUTES_H
#include "platform/glue.h"
#include <stddef.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef unsigned long long CUhandle;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2

#define MT_CUDA_ENTRIES(X) \
	X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, CUdeviceptr *, size_t) \
	X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, CUdeviceptr *, size_t *, size_t, size_t, unsigned) \
	X(cuMemAllocManaged, "cuMemAllocManaged", 0, 0, CUdeviceptr *, size_t, unsigned) \
	X(cuMemFree_v2, "cuMemFree", 3020, 0, CUdeviceptr) \
	X(cuMemAllocAsync, "cuMemAllocAsync", 0, 0, CUdeviceptr *, size_t, CUstream) \
	X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 0, 1, CUdeviceptr *, size_t, CUstream) \
	X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, 0, CUdeviceptr *, size_t, void *, CUstream) \
	X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 0, 1, CUdeviceptr *, size_t, void *, CUstream) \
	X(cuMemFreeAsync, "cuMemFreeAsync", 0, 0, CUdeviceptr, CUstream) \
	X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 0, 1, CUdeviceptr, CUstream) \
	X(cuMemHostAlloc, "cuMemHostAlloc", 0, 0, void **, size_t, unsigned) \
	X(cuMemAllocHost_v2, "cuMemAllocHost", 3020, 0, void **, size_t) \
	X(cuMemFreeHost, "cuMemFreeHost", 0, 0, void *) \
	X(cuMemCreate, "cuMemCreate", 0, 0, CUhandle *, size_t, const void *, unsigned long long) \
	X(cuMemRelease, "cuMemRelease", 0, 0, CUhandle) \
	X(cuMemMap, "cuMemMap", 0, 0, CUdeviceptr, size_t, size_t, CUhandle, unsigned long long) \
	X(cuMemUnmap, "cuMemUnmap", 0, 0, CUdeviceptr, size_t) \
	X(cuMemAddressReserve, "cuMemAddressReserve", 0, 0, CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) \
	X(cuMemAddressFree, "cuMemAddressFree", 0, 0, CUdeviceptr, size_t) \
	X(cuArrayCreate_v2, "cuArrayCreate", 3020, 0, void **, const void *) \
	X(cuArray3DCreate_v2, "cuArray3DCreate", 3020, 0, void **, const void *) \
	X(cuArrayDestroy, "cuArrayDestroy", 0, 0, void *) \
	X(cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0, size_t *, size_t *) \
	X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0, const char *, void **, int, unsigned long long, int *) \
	X(cuGetProcAddress, "cuGetProcAddress", 11030, 0, const char *, void **, int, unsigned long long)

/* Each entry point's function type, mt_cufn_<name>, and its index. */
#define MT_CUDA_FN(name, base, ver, pt, ...) typedef CUresult (*mt_cufn_##name)(__VA_ARGS__);
MT_CUDA_ENTRIES(MT_CUDA_FN)
#undef MT_CUDA_FN

#define MT_CUDA_IX(name, ...) IX_##name,
enum { MT_CUDA_ENTRIES(MT_CUDA_IX) MT_CUDA_NENTRIES };
#undef MT_CUDA_IX

struct mt_cuda_row {
	const char *name; /* exact variant: "cuMemAllocAsync_ptsz" */
	const char *base; /* the name cuGetProcAddress is asked for */
	int min_version;  /* cudaVersion selecting this ABI (0: any) */
	int ptsz;         /* the per-thread-stream variant */
};
/* [IX_<name>]; hidden, so the wrappers read them PC-relative */
extern MT_HIDDEN const struct mt_cuda_row mt_cuda_rows[MT_CUDA_NENTRIES];
extern MT_HIDDEN void *mt_cuda_real[MT_CUDA_NENTRIES];

/* The driver's function for entry ix, or NULL while no route has told
 * us and nothing has looked it up.  Never allocates. */
static inline void *
mt_cuda_real_of(int ix) {
	return __atomic_load_n(&mt_cuda_real[ix], __ATOMIC_ACQUIRE);
}
/* Record p as entry ix's driver function; the first one wins. */
void mt_cuda_set_real(int ix, void *p);

/* The index of an entry point by its exact name, or -1. */
int mt_cuda_by_name(const char *name);
/* The entry cuGetProcAddress should hand out a wrapper of for (base,
 * cudaVersion, flags), or -1 to pass the driver's answer through: the
 * per-thread-stream flag selects the _ptsz variant (the plain one where
 * there is none), a version below an entry's min_version skips it, and of
 * those left the highest min_version wins. */
int mt_cuda_by_request(const char *base, int version, unsigned long long flags);
/* libcuda's own definition of name (libcuda opened RTLD_NOLOAD at the
 * first need: a process that has not loaded it gets NULL). */
void *mt_cuda_driver_sym(const char *name);
/* cuCtxGetDevice (asked for, never wrapped), looked up at first use
 * through the real cuGetProcAddress[_v2], else libcuda's own: the
 * driver's answer, or a nonzero result where there is no such function. */
CUresult mt_cuda_ctx_get_device(int *d);

#endif
