/*
 * cuda_entries.h — the driver entry points the shim wraps, one row each:
 * X(name, base, min_version, ptsz, parameter types...)
 *   name         the exact exported variant ("cuMemAllocAsync_ptsz")
 *   base         what cuGetProcAddress is asked for ("cuMemAllocAsync")
 *   min_version  the cudaVersion from which cuGetProcAddress hands out this
 *                ABI (0: any); a lower one passes the driver's answer on
 *   ptsz         1 for the per-thread default stream variant
 * Adding an entry point: a row here and its wrapper body in cuda.c (the
 * declarations, the real pointer, the routes' table and the bookkeeping
 * arrays follow from the row; a missing body fails the link).
 */
#ifndef MT_CUDA_ENTRIES_H
#define MT_CUDA_ENTRIES_H
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

#endif
