/* join.c — the driver's view of an OOM joined with PyTorch's (join.h).
 * Driver allocations: a plain one (cuMemAlloc & co.) is device memory at
 * an address; a VMM handle (cuMemCreate) is device memory without one and
 * its mappings (cuMemMap, PyTorch's expandable segments, NCCL's buffers)
 * place it, so inside a torch segment the mappings count, and handles'
 * bytes that no listed mapping shows are a line of their own.  A driver
 * allocation is under a torch segment when it lies wholly inside it. */
#include "answer/join.h"
#include "answer/sites.h"
#include "base/util.h"
#include <stdlib.h>
#include <string.h>

static const struct tsnap *cmp_t;

static int
cmp_tseg_addr(const void *a, const void *b) {
	const struct tseg *x = &cmp_t->segs[*(const size_t *)a], *y = &cmp_t->segs[*(const size_t *)b];
	return (x->addr > y->addr) - (x->addr < y->addr);
}

static int
cmp_jseg(const void *a, const void *b) {
	const struct jseg *x = a, *y = b;
	if (x->t->size != y->t->size)
		return x->t->size < y->t->size ? 1 : -1;
	return (x->t->addr > y->t->addr) - (x->t->addr < y->t->addr);
}

static int
cmp_block(const void *a, const void *b) {
	const struct tblock *x = &cmp_t->blocks[*(const size_t *)a],
			    *y = &cmp_t->blocks[*(const size_t *)b];
	if (x->size != y->size)
		return x->size < y->size ? 1 : -1;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

static int
cmp_out(const void *a, const void *b) {
	const struct jout *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return (x->seg > y->seg) - (x->seg < y->seg);
}

const char *
join_owner(const struct mfile *f, uint32_t stack) {
	static const struct { const char *prefix, *name; } libs[] = {
		{"libnccl", "NCCL"}, {"libcublasLt", "cuBLAS"}, {"libcublas", "cuBLAS"},
		{"libcudnn", "cuDNN"}, {"libcufft", "cuFFT"}, {"libcusparse", "cuSPARSE"},
		{"libcusolver", "cuSOLVER"}, {"libcurand", "cuRAND"}, {"libnvshmem", "NVSHMEM"},
		{"libc10_cuda", "PyTorch (libc10_cuda)"}, {"libtorch_cuda", "PyTorch (libtorch_cuda)"},
	};
	struct frame fr[256];
	int n = site_frames(f, stack, fr, 256);
	for (int i = 0; i < n; i++) {
		if (fr[i].python || !fr[i].module)
			continue;
		const char *base = strrchr(fr[i].module, '/');
		base = base ? base + 1 : fr[i].module;
		for (size_t k = 0; k < sizeof libs / sizeof libs[0]; k++)
			if (!strncmp(base, libs[k].prefix, strlen(libs[k].prefix)))
				return libs[k].name;
	}
	return NULL;
}

static int
device_memory(const struct segment *s) {
	return s->kind == K_CUDA || s->kind == K_CUDA_MANAGED || s->kind == K_CUDA_VMM;
}

/* The torch segment (index into ix) wholly holding [a, a+n), or -1. */
static long
holder(const struct tsnap *t, const size_t *ix, size_t n, uint64_t a, uint64_t len) {
	size_t lo = 0, hi = n;
	while (lo < hi) { /* the first segment starting above a */
		size_t mid = (lo + hi) / 2;
		if (t->segs[ix[mid]].addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	const struct tseg *s = &t->segs[ix[lo - 1]];
	return a + len >= a && a + len <= s->addr + s->size ? (long)(lo - 1) : -1;
}

struct join *
join_compute(const struct mfile *f, const struct tsnap *t) {
	struct join *j = xcalloc(1, sizeof *j);
	j->device = (int)t->device;
	j->driver_used = f->oom && f->oom->drv_total > 0 ? f->oom->drv_total - f->oom->drv_free : -1;
	/* torch's segments of the device, by address */
	size_t *ix = xmalloc(t->nsegs * sizeof *ix), n = 0;
	for (size_t i = 1; i < t->nsegs; i++)
		if (t->segs[i].device == j->device)
			ix[n++] = i;
	cmp_t = t;
	xqsort(ix, n, sizeof *ix, cmp_tseg_addr);
	j->segs = xcalloc(n ? n : 1, sizeof *j->segs);
	j->nsegs = n;
	for (size_t k = 0; k < n; k++) {
		struct jseg *g = &j->segs[k];
		g->t = &t->segs[ix[k]];
		j->reserved += (int64_t)g->t->size;
		g->blocks = xmalloc((g->t->nblocks ? g->t->nblocks : 1) * sizeof *g->blocks);
		for (size_t b = 0; b < g->t->nblocks; b++) {
			const struct tblock *bl = &t->blocks[g->t->block0 + b];
			g->blocks[g->nblocks++] = g->t->block0 + b;
			int64_t *to = bl->state == TB_ALLOCATED ? &g->allocated
				      : bl->state == TB_PENDING ? &g->pending : &g->inactive;
			*to += (int64_t)bl->size;
		}
		xqsort(g->blocks, g->nblocks, sizeof *g->blocks, cmp_block);
		j->allocated += g->allocated;
		j->pending += g->pending;
	}
	j->cached = j->reserved - j->allocated;
	/* the driver's allocations of the device */
	int64_t handles = 0, mapped = 0;
	j->outs = xcalloc(f->nsegs + 1, sizeof *j->outs);
	for (size_t i = 0; i < f->nsegs; i++) {
		const struct segment *s = &f->segs[i];
		if (s->device != j->device)
			continue;
		if (s->kind == K_CUDA_HOST) {
			j->pinned += (int64_t)s->size;
			continue;
		}
		if (!device_memory(s))
			continue;
		if (!s->mapped)
			j->live += (int64_t)s->size;
		if (s->is_handle && s->kind == K_CUDA_VMM) {
			handles += (int64_t)s->size; /* placed by its mappings */
			continue;
		}
		if (s->mapped)
			mapped += (int64_t)s->size;
		long h = s->is_handle ? -1 : holder(t, ix, n, s->addr, s->size);
		if (h >= 0) {
			struct jseg *g = &j->segs[h];
			g->drv = xrealloc(g->drv, (g->ndrv + 1) * sizeof *g->drv);
			g->drv[g->ndrv++] = i;
			g->drv_bytes += (int64_t)s->size;
			j->inside += (int64_t)s->size;
		} else {
			j->outs[j->nouts++] = (struct jout){i, (int64_t)s->size, join_owner(f, s->stack)};
			j->outside += (int64_t)s->size;
		}
	}
	j->unmapped = handles - mapped;
	if (j->unmapped > 0) {
		j->outs[j->nouts++] = (struct jout){SIZE_MAX, j->unmapped, NULL};
		j->outside += j->unmapped;
	}
	j->mismatch = j->reserved - j->inside;
	xqsort(j->segs, j->nsegs, sizeof *j->segs, cmp_jseg);
	xqsort(j->outs, j->nouts, sizeof *j->outs, cmp_out);
	free(ix);
	return j;
}

void
join_free(struct join *j) {
	if (!j)
		return;
	for (size_t k = 0; k < j->nsegs; k++)
		free(j->segs[k].drv), free(j->segs[k].blocks);
	free(j->segs);
	free(j->outs);
	free(j);
}
