/*
 * cuda.c — CUDA driver allocations per call site (cuda.h).
 *
 * Three routes lead here (measured on CUDA 13's libcudart; miss one and a
 * class of programs shows zero allocations):
 *  1. direct: the exported cuMemAlloc_v2 & co. serve programs linked with
 *     -lcuda; the real function is the next definition after ours.
 *  2. dlsym: libraries dlopen("libcuda.so.1") and dlsym on that handle,
 *     which never searches LD_PRELOAD, so dlsym itself is interposed (the
 *     trampoline in dl.c): a request for a tracked entry point comes to
 *     serve_dlsym, which returns our wrapper and records the driver's
 *     pointer.  Every other request jumps to the real dlsym.
 *  3. cuGetProcAddress[_v2]: its results are substituted by (symbol,
 *     cudaVersion, flags): the per-thread-stream flag selects the _ptsz
 *     wrapper, a version below the _v2 ABI passes through untouched.  Its
 *     self-lookup ("cuGetProcAddress") returns our wrapper, because cudart
 *     makes all later lookups through the pointer it gets back.
 * A wrapper's real pointer is whichever route told us first; the shim's
 * own exports are never recorded as real (they are recognised by address).
 * The entry points, their real pointers and the driver lookups are
 * platform/cudaroutes.h; here are the wrappers and the routes' choices.
 * Wrappers hold the re-entry guard around the driver call, so the driver's
 * own host allocations inside it (pinned buffers' mmaps) are not counted
 * twice.  On CUDA_ERROR_OUT_OF_MEMORY the failing thread writes the dump
 * (oom.c) before the error returns.
 */
#include "platform/glue.h"
#include "entry/cuda.h"
#include "platform/config.h"
#include "platform/cudaroutes.h"
#include "platform/dl.h"
#include "output/oom.h"
#include "capture/charge.h"
#include "state/devices.h"
#include "state/events.h"
#include "state/sites.h"
#include <dlfcn.h>
#include <string.h>

/* ---- routes and the real dlsym ---------------------------------------- */

static int routes = 15; /* R_* bits: MEMTALLY_CUDA_ROUTES, for ablation tests */
enum { R_DIRECT = 1, R_DLSYM = 2, R_GPA = 4, R_SELF = 8 };

/* ---- the wrappers ------------------------------------------------------ */

/* Each entry point's exported wrapper (cudaroutes.h's rows), and the
 * wrappers by index, to hand out and to recognise. */
#define W(name, base, ver, pt, ...) MT_EXPORT CUresult name(__VA_ARGS__);
MT_CUDA_ENTRIES(W)
#undef W

#define P(name, ...) (void *)name,
static void *const wrapper[] = {MT_CUDA_ENTRIES(P)};
#undef P
_Static_assert(sizeof wrapper / sizeof wrapper[0] == MT_CUDA_NENTRIES, "one wrapper per row");

static int
is_own(const void *p) {
	for (size_t i = 0; i < MT_CUDA_NENTRIES; i++)
		if (wrapper[i] == p)
			return 1;
	return 0;
}

/* Which wrappers a dlsym or cuGetProcAddress route handed out: with the
 * direct route switched off (ablation), only those record. */
static int routed[MT_CUDA_NENTRIES];

/* Remember a driver pointer for wrapper ix (first one wins; never ours). */
static void
learn(int ix, void *p) {
	if (!p || is_own(p))
		return;
	routed[ix] = 1;
	mt_cuda_set_real(ix, p);
}

/* The real function for a wrapper when no route has told us: the next
 * definition after ours (a -lcuda program), else libcuda's own. */
static void *
resolve(int ix) {
	void *p = mt_cuda_real_of(ix);
	if (p)
		return p;
	p = mt_dlsym(RTLD_NEXT, mt_cuda_rows[ix].name); /* from the shim: next after it */
	if (!p || is_own(p))
		p = mt_cuda_driver_sym(mt_cuda_rows[ix].name);
	if (p && !is_own(p))
		mt_cuda_set_real(ix, p); /* not a route: `routed` stays as it is */
	return mt_cuda_real_of(ix);
}

#define RESOLVE(name) ((mt_cufn_##name)resolve(IX_##name))

/* ---- route 2: dlsym ----------------------------------------------------
 * The trampoline (dl.c) asks want() for names starting "cu" (not for
 * RTLD_NEXT) and jumps to serve() when it says yes.  serve's own lookup
 * is made from the shim: for RTLD_DEFAULT that finds our export, and the
 * driver's pointer is then resolved as for the direct route. */

static int
want_dlsym(const char *name) {
	return mt_cfg.cuda && (routes & R_DLSYM) && mt_cuda_by_name(name) >= 0;
}

static void *
serve_dlsym(void *handle, const char *name) {
	int ix = mt_cuda_by_name(name);
	void *p = mt_dlsym(handle, name);
	if (ix < 0)
		return p;
	if (p && is_own(p)) /* RTLD_DEFAULT finds our export */
		p = resolve(ix);
	else
		learn(ix, p);
	return p ? wrapper[ix] : NULL;
}

/* ---- route 3: cuGetProcAddress ------------------------------------------ */

static void
substitute(const char *sym, void **pfn, int version, unsigned long long flags) {
	if (!pfn || !*pfn || !sym || !mt_cfg.cuda || !(routes & R_GPA))
		return;
	if (!strcmp(sym, "cuGetProcAddress") && !(routes & R_SELF))
		return;
	int ix = mt_cuda_by_request(sym, version, flags);
	if (ix < 0)
		return; /* not ours, or a v1 ABI: untouched */
	learn(ix, *pfn);
	*pfn = wrapper[ix];
}

MT_EXPORT CUresult
cuGetProcAddress(const char *sym, void **pfn, int version, unsigned long long flags) {
	mt_cufn_cuGetProcAddress f = RESOLVE(cuGetProcAddress);
	if (!f)
		return 3; /* CUDA_ERROR_NOT_INITIALIZED */
	CUresult r = f(sym, pfn, version, flags);
	if (r == CUDA_SUCCESS)
		substitute(sym, pfn, version, flags);
	return r;
}

MT_EXPORT CUresult
cuGetProcAddress_v2(const char *sym, void **pfn, int version, unsigned long long flags,
		    int *status) {
	mt_cufn_cuGetProcAddress_v2 f = RESOLVE(cuGetProcAddress_v2);
	if (!f)
		return 3;
	CUresult r = f(sym, pfn, version, flags, status);
	if (r == CUDA_SUCCESS && (!status || *status == 0))
		substitute(sym, pfn, version, flags);
	return r;
}

/* ---- per-device figures ---------------------------------------------- */

/* Streams as small numbers for the pointer table and the dumps. */
#define MAXSTREAMS 1024
static CUstream streams[MAXSTREAMS];
static uint32_t
stream_index(CUstream s) {
	if (!s)
		return 0;
	uint64_t h = ((uintptr_t)s * 0x9e3779b97f4a7c15ull) >> 54; /* 10 bits */
	for (uint32_t i = 0; i < MAXSTREAMS; i++) {
		uint32_t k = (uint32_t)((h + i) & (MAXSTREAMS - 1));
		CUstream cur = __atomic_load_n(&streams[k], __ATOMIC_ACQUIRE);
		if (cur == s)
			return k + 1;
		if (!cur) {
			CUstream none = NULL;
			if (__atomic_compare_exchange_n(&streams[k], &none, s, 0,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
			    none == s)
				return k + 1;
		}
	}
	return MAXSTREAMS + 1; /* many streams: one shared number */
}

static int
current_device(void) {
	int d = 0;
	if (mt_cuda_ctx_get_device(&d) != CUDA_SUCCESS || d < 0 || d >= MT_MAXDEV)
		d = 0;
	return d;
}

/* Driver free/total for the dumps and, at most once a second, for the
 * snapshots (asked on the allocating thread: it has a current context). */
static void
driver_info(int d, int force) {
	uint64_t now = mt_ms_since_start();
	if (!force && mt_devs[d].info_ms && now - mt_devs[d].info_ms < 1000)
		return;
	mt_cufn_cuMemGetInfo_v2 f = RESOLVE(cuMemGetInfo_v2);
	size_t fr = 0, tot = 0;
	if (f && f(&fr, &tot) == CUDA_SUCCESS)
		mt_dev_info(d, fr, tot, now);
}

static int
tracking(void) {
	return __atomic_load_n(&mt_active, __ATOMIC_RELAXED) && mt_cfg.cuda && !mt_self.guard;
}

/* After the driver answered an allocation. */
static void
on_alloc(CUresult r, uintptr_t key, uint64_t size, int kind, int d, CUstream s,
	 const char *api) {
	if (r == CUDA_SUCCESS) {
		int fl = (key & MT_TAG_MASK) == MT_TAG_HANDLE ? MT_PTR_HANDLE : 0;
		if (mt_dev_track(key, size, kind, d, stream_index(s), fl, 0) >= 0 &&
		    mt_dev_alloc(d, kind, size))
			mt_oom_cuda_recovered(d); /* its dump's outcome */
		driver_info(d, 0);
	} else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
		int retry = mt_dev_oom(d);
		driver_info(d, 1);
		mt_event(MT_EV_OOM, kind, 0, size, mt_capture(mt_stack_key(kind, d)));
		mt_oom_cuda(api, size, d, mt_devs[d].drv_free, mt_devs[d].drv_total, retry);
	}
}

/* ---- the allocation wrappers -------------------------------------------- */

#define ENTER(name)                                                            \
	mt_cufn_##name f_ = RESOLVE(name);                                     \
	if (!f_)                                                               \
		return 3; /* CUDA_ERROR_NOT_INITIALIZED: no driver */          \
	int track_ = tracking() && ((routes & R_DIRECT) || routed[IX_##name]); \
	if (track_)                                                            \
		mt_self.guard++;
#define LEAVE()                                                                \
	if (track_)                                                            \
		mt_self.guard--;

#define DEV(p) (MT_TAG_DEV | (uintptr_t)(p))
#define HANDLE(h) (MT_TAG_HANDLE | ((uintptr_t)(h) & ~MT_TAG_MASK))

static CUresult
alloc_common(CUresult r, int track, CUdeviceptr *p, uint64_t size, int kind,
	     CUstream s, const char *api) {
	if (track) {
		int e = errno;
		on_alloc(r, r == CUDA_SUCCESS ? DEV(*p) : 0, size, kind, current_device(), s, api);
		errno = e;
	}
	return r;
}

MT_EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	ENTER(cuMemAlloc_v2)
	CUresult r = alloc_common(f_(p, n), track_, p, n, MT_CUDA, NULL, "cuMemAlloc_v2");
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned el) {
	ENTER(cuMemAllocPitch_v2)
	CUresult r = f_(p, pitch, w, h, el);
	r = alloc_common(r, track_, p, r == CUDA_SUCCESS && pitch ? *pitch * h : w * h,
			 MT_CUDA, NULL, "cuMemAllocPitch_v2");
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned fl) {
	ENTER(cuMemAllocManaged)
	CUresult r = alloc_common(f_(p, n, fl), track_, p, n, MT_CUDA_MANAGED, NULL,
				  "cuMemAllocManaged");
	LEAVE()
	return r;
}

#define ASYNC_ALLOC(name)                                                      \
	MT_EXPORT CUresult name(CUdeviceptr *p, size_t n, CUstream s) {        \
		ENTER(name)                                                    \
		CUresult r = alloc_common(f_(p, n, s), track_, p, n, MT_CUDA, s, #name); \
		LEAVE()                                                        \
		return r;                                                      \
	}
ASYNC_ALLOC(cuMemAllocAsync)
ASYNC_ALLOC(cuMemAllocAsync_ptsz)

#define POOL_ALLOC(name)                                                       \
	MT_EXPORT CUresult name(CUdeviceptr *p, size_t n, void *pool, CUstream s) { \
		ENTER(name)                                                    \
		CUresult r = alloc_common(f_(p, n, pool, s), track_, p, n, MT_CUDA, s, #name); \
		LEAVE()                                                        \
		return r;                                                      \
	}
POOL_ALLOC(cuMemAllocFromPoolAsync)
POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz)

/* Frees: the entry goes before the driver call (another thread may be
 * handed the same address the moment it returns) and back if it failed. */
static void
free_common(int track, uintptr_t key, CUresult r, struct mt_ptr *e, int had) {
	if (!track || !had)
		return;
	if (r == CUDA_SUCCESS) /* else the block is still there: back it goes */
		mt_dev_free(e);
	else
		mt_dev_track(key, e->size, e->kind, e->device, e->stream, e->flags, e->stack);
}

#define FREE_BODY(call, key)                                                   \
	struct mt_ptr p_;                                                      \
	int had_ = 0;                                                          \
	if (track_) {                                                          \
		int er_ = errno;                                               \
		had_ = mt_dev_untrack(key, &p_);                               \
		errno = er_;                                                   \
	}                                                                      \
	CUresult r = call;                                                     \
	free_common(track_, key, r, &p_, had_);

MT_EXPORT CUresult
cuMemFree_v2(CUdeviceptr p) {
	ENTER(cuMemFree_v2)
	FREE_BODY(f_(p), DEV(p))
	LEAVE()
	return r;
}

#define ASYNC_FREE(name)                                                       \
	MT_EXPORT CUresult name(CUdeviceptr p, CUstream s) {                   \
		ENTER(name)                                                    \
		FREE_BODY(f_(p, s), DEV(p))                                    \
		LEAVE()                                                        \
		return r;                                                      \
	}
ASYNC_FREE(cuMemFreeAsync)
ASYNC_FREE(cuMemFreeAsync_ptsz)

MT_EXPORT CUresult
cuMemHostAlloc(void **pp, size_t n, unsigned fl) {
	ENTER(cuMemHostAlloc)
	CUresult r = f_(pp, n, fl);
	CUdeviceptr p = r == CUDA_SUCCESS && pp ? (CUdeviceptr)(uintptr_t)*pp : 0;
	alloc_common(r, track_, &p, n, MT_CUDA_HOST, NULL, "cuMemHostAlloc");
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemAllocHost_v2(void **pp, size_t n) {
	ENTER(cuMemAllocHost_v2)
	CUresult r = f_(pp, n);
	CUdeviceptr p = r == CUDA_SUCCESS && pp ? (CUdeviceptr)(uintptr_t)*pp : 0;
	alloc_common(r, track_, &p, n, MT_CUDA_HOST, NULL, "cuMemAllocHost_v2");
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemFreeHost(void *p) {
	ENTER(cuMemFreeHost)
	FREE_BODY(f_(p), DEV(p))
	LEAVE()
	return r;
}

/* VMM (PyTorch's expandable segments, NCCL): memory is charged at
 * cuMemCreate and released at cuMemRelease; mappings are kept (with the
 * handle's call site) for the dumps' segment map but charge nothing;
 * cuMemAddressReserve is address space, not memory: events only. */
MT_EXPORT CUresult
cuMemCreate(CUhandle *h, size_t n, const void *prop, unsigned long long fl) {
	ENTER(cuMemCreate)
	CUresult r = f_(h, n, prop, fl);
	if (track_) {
		int er = errno;
		const int *loc = prop ? (const int *)prop + 2 : NULL; /* location {type, id} */
		int host = loc && loc[0] >= 2 && loc[0] <= 4;     /* HOST, HOST_NUMA[_CURRENT] */
		int d = loc && loc[0] == 1 && loc[1] >= 0 && loc[1] < MT_MAXDEV ? loc[1] : 0;
		on_alloc(r, r == CUDA_SUCCESS ? HANDLE(*h) : 0, n, host ? MT_CUDA_HOST : MT_CUDA_VMM,
			 d, NULL, "cuMemCreate");
		errno = er;
	}
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemRelease(CUhandle h) {
	ENTER(cuMemRelease)
	FREE_BODY(f_(h), HANDLE(h))
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemMap(CUdeviceptr p, size_t n, size_t off, CUhandle h, unsigned long long fl) {
	ENTER(cuMemMap)
	CUresult r = f_(p, n, off, h, fl);
	if (track_ && r == CUDA_SUCCESS) {
		int er = errno;
		struct mt_ptr he;
		uint32_t stack = 0;
		int d = 0, kind = MT_CUDA_VMM;
		if (mt_ptrtab_take(HANDLE(h), &he, 0)) { /* look, then put it back */
			struct mt_ptr old;
			mt_ptrtab_put(&he, &old, 0);
			stack = he.stack, d = he.device, kind = he.kind;
		}
		mt_dev_track(DEV(p), n, kind, d, 0, MT_PTR_MAPPED, stack);
		if (mt_dev_settle(d)) /* a VMM growth mapped: usable memory */
			mt_oom_cuda_recovered(d);
		errno = er;
	}
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemUnmap(CUdeviceptr p, size_t n) {
	ENTER(cuMemUnmap)
	CUresult r = f_(p, n);
	if (track_ && r == CUDA_SUCCESS) {
		struct mt_ptr e;
		int er = errno;
		mt_dev_untrack(DEV(p), &e);
		errno = er;
	}
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr,
		    unsigned long long fl) {
	ENTER(cuMemAddressReserve)
	CUresult r = f_(p, n, align, addr, fl);
	if (track_ && r == CUDA_SUCCESS && p)
		mt_event(MT_EV_ALLOC, MT_CUDA_VMM, (uintptr_t)*p, n, 0);
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemAddressFree(CUdeviceptr p, size_t n) {
	ENTER(cuMemAddressFree)
	CUresult r = f_(p, n);
	if (track_ && r == CUDA_SUCCESS)
		mt_event(MT_EV_FREE, MT_CUDA_VMM, (uintptr_t)p, n, 0);
	LEAVE()
	return r;
}

/* CUDA arrays: bytes from the descriptor (width x height x depth x
 * channels x element size; the driver's padding is not visible). */
static uint64_t
format_bytes(int fmt) {
	switch (fmt) {
	case 0x01: case 0x08: return 1;           /* (UN)SIGNED_INT8 */
	case 0x02: case 0x09: case 0x10: return 2; /* INT16, HALF */
	default: return 4;                        /* INT32, FLOAT, ... */
	}
}

MT_EXPORT CUresult
cuArrayCreate_v2(void **arr, const void *desc) {
	ENTER(cuArrayCreate_v2)
	CUresult r = f_(arr, desc);
	if (track_) {
		const size_t *wh = desc;
		const int *fc = desc ? (const int *)(wh + 2) : NULL; /* Format, NumChannels */
		uint64_t n = desc ? wh[0] * (wh[1] ? wh[1] : 1) * (uint64_t)fc[1] *
					    format_bytes(fc[0])
				  : 0;
		int er = errno;
		on_alloc(r, r == CUDA_SUCCESS ? HANDLE(*arr) : 0, n, MT_CUDA, current_device(),
			 NULL, "cuArrayCreate_v2");
		errno = er;
	}
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuArray3DCreate_v2(void **arr, const void *desc) {
	ENTER(cuArray3DCreate_v2)
	CUresult r = f_(arr, desc);
	if (track_) {
		const size_t *whd = desc;
		const int *fc = desc ? (const int *)(whd + 3) : NULL;
		uint64_t n = desc ? whd[0] * (whd[1] ? whd[1] : 1) * (whd[2] ? whd[2] : 1) *
					    (uint64_t)fc[1] * format_bytes(fc[0])
				  : 0;
		int er = errno;
		on_alloc(r, r == CUDA_SUCCESS ? HANDLE(*arr) : 0, n, MT_CUDA, current_device(),
			 NULL, "cuArray3DCreate_v2");
		errno = er;
	}
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuArrayDestroy(void *arr) {
	ENTER(cuArrayDestroy)
	FREE_BODY(f_(arr), HANDLE(arr))
	LEAVE()
	return r;
}

MT_EXPORT CUresult
cuMemGetInfo_v2(size_t *fr, size_t *tot) {
	mt_cufn_cuMemGetInfo_v2 f = RESOLVE(cuMemGetInfo_v2);
	return f ? f(fr, tot) : 3;
}

void
mt_cuda_init(void) {
	routes = (int)mt_cfg.cuda_routes;
	mt_real_dlsym();
	mt_dlsym_filter(want_dlsym, serve_dlsym);
}
