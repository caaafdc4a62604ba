/*
 * cudaroutes.c — the CUDA driver entry points the shim wraps
 * (cudaroutes.h): their rows, the driver's function for each, and the
 * lookups in the driver.  entry/cuda.c decides which route's answer to
 * take (it knows its wrappers); this file only keeps and finds.
 */
#include "platform/glue.h"
#include "platform/cudaroutes.h"
#include "platform/dl.h"
#include <dlfcn.h>
#include <string.h>

#define PER_THREAD 2 /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

#define ROW(n, b, v, p, ...) {#n, b, v, p},
MT_HIDDEN const struct mt_cuda_row mt_cuda_rows[MT_CUDA_NENTRIES] = {MT_CUDA_ENTRIES(ROW)};
#undef ROW
_Static_assert(sizeof mt_cuda_rows / sizeof mt_cuda_rows[0] == MT_CUDA_NENTRIES,
	       "one row per entry point");

MT_HIDDEN void *mt_cuda_real[MT_CUDA_NENTRIES];

static void *own_handle; /* libcuda, opened NOLOAD when a lookup needs it */

void
mt_cuda_set_real(int ix, void *p) {
	void *none = NULL;
	__atomic_compare_exchange_n(&mt_cuda_real[ix], &none, p, 0, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

int
mt_cuda_by_name(const char *name) {
	for (int i = 0; i < MT_CUDA_NENTRIES; i++)
		if (!strcmp(mt_cuda_rows[i].name, name))
			return i;
	return -1;
}

int
mt_cuda_by_request(const char *base, int version, unsigned long long flags) {
	int best = -1;
	int want_pt = (flags & PER_THREAD) != 0;
	for (int i = 0; i < MT_CUDA_NENTRIES; i++) {
		const struct mt_cuda_row *e = &mt_cuda_rows[i];
		if (strcmp(e->base, base) || version < e->min_version)
			continue;
		if (e->ptsz != want_pt) {
			/* a per-thread request for a function without a _ptsz
			 * variant takes the plain one */
			int has_pt = 0;
			for (int k = 0; k < MT_CUDA_NENTRIES; k++)
				has_pt |= !strcmp(mt_cuda_rows[k].base, base) && mt_cuda_rows[k].ptsz;
			if (want_pt ? has_pt : 1)
				continue;
		}
		if (best < 0 || e->min_version > mt_cuda_rows[best].min_version)
			best = i;
	}
	return best;
}

void *
mt_cuda_driver_sym(const char *name) {
	if (!own_handle)
		own_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	return own_handle ? mt_dlsym(own_handle, name) : NULL;
}

static CUresult (*real_cuCtxGetDevice)(int *);

CUresult
mt_cuda_ctx_get_device(int *d) {
	CUresult (*f)(int *) = real_cuCtxGetDevice;
	if (!f) {
		/* not a tracked function: ask the driver through what we have */
		void *p = NULL;
		mt_cufn_cuGetProcAddress_v2 gpa2 =
			(mt_cufn_cuGetProcAddress_v2)mt_cuda_real[IX_cuGetProcAddress_v2];
		mt_cufn_cuGetProcAddress gpa = (mt_cufn_cuGetProcAddress)mt_cuda_real[IX_cuGetProcAddress];
		if (gpa2)
			gpa2("cuCtxGetDevice", &p, 2000, 0, NULL);
		else if (gpa)
			gpa("cuCtxGetDevice", &p, 2000, 0);
		if (!p)
			p = mt_cuda_driver_sym("cuCtxGetDevice");
		*(void **)&real_cuCtxGetDevice = p;
		f = real_cuCtxGetDevice;
	}
	return f ? f(d) : 3; /* CUDA_ERROR_NOT_INITIALIZED */
}
