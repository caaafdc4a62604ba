/*
 * devices.c — per-device figures (devices.h).
 */
#include "platform/glue.h"
#include "state/devices.h"
#include "platform/buf.h"
#include "state/ptrtab.h"
#include "state/sites.h"
#include "state/totals.h"
#include <string.h>

struct mt_dev mt_devs[MT_MAXDEV];

int
mt_dev_alloc(int d, int kind, uint64_t size) {
	if (kind == MT_CUDA_HOST)
		return 0; /* host memory: in the kind totals only */
	struct mt_dev *v = &mt_devs[d % MT_MAXDEV];
	v->used = 1;
	mt_add(&v->allocs, 1);
	mt_add(&v->live_count, 1);
	if (mt_raise_peak(&v->peak_bytes, mt_add(&v->live_bytes, (int64_t)size)))
		mt_peak_moved(MT_NKINDS + d % MT_MAXDEV); /* its sites' at-peak bytes */
	return kind == MT_CUDA_VMM ? 0 : mt_dev_settle(d);
}

int
mt_dev_settle(int d) {
	struct mt_dev *v = &mt_devs[d % MT_MAXDEV];
	if (!__atomic_load_n(&v->oom_pending, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&v->oom_pending, 0, __ATOMIC_RELAXED))
		return 0;
	mt_add(&v->recovered, 1); /* a success after an OOM */
	__atomic_store_n(&v->last_oom, MT_OOM_RECOVERED, __ATOMIC_RELAXED);
	return 1;
}

int
mt_dev_raised(int d) {
	struct mt_dev *v = &mt_devs[d % MT_MAXDEV];
	v->used = 1;
	mt_add(&v->raised, 1);
	__atomic_store_n(&v->last_oom, MT_OOM_RAISED, __ATOMIC_RELAXED);
	return __atomic_exchange_n(&v->oom_pending, 0, __ATOMIC_RELAXED);
}

void
mt_dev_torch(int d, double step, const uint64_t fig[4]) {
	struct mt_dev *v = &mt_devs[d % MT_MAXDEV];
	uint64_t s = __atomic_load_n(&v->tseq, __ATOMIC_RELAXED);
	/* one writer at a time in practice (the Python thread that steps);
	 * two at once only make a reader retry or skip, never mix */
	__atomic_store_n(&v->tseq, s | 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++)
		__atomic_store_n(&v->tfig[i], fig[i], __ATOMIC_RELAXED);
	uint64_t bits;
	memcpy(&bits, &step, sizeof bits);
	__atomic_store_n((uint64_t *)(void *)&v->tstep, bits, __ATOMIC_RELAXED);
	__atomic_store_n(&v->tseq, (s | 1) + 1, __ATOMIC_RELEASE);
	v->used = 1;
}

/* The PyTorch figures as one step left them; 0 when never set or being
 * written through every try. */
static int
torch_read(struct mt_dev *v, uint64_t fig[4], double *step) {
	for (int tries = 0; tries < 100; tries++) {
		uint64_t s = __atomic_load_n(&v->tseq, __ATOMIC_ACQUIRE);
		if (!s)
			return 0;
		if (s & 1)
			continue;
		for (int i = 0; i < 4; i++)
			fig[i] = __atomic_load_n(&v->tfig[i], __ATOMIC_RELAXED);
		uint64_t bits = __atomic_load_n((uint64_t *)(void *)&v->tstep, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&v->tseq, __ATOMIC_RELAXED) == s) {
			memcpy(step, &bits, sizeof *step);
			return 1;
		}
	}
	return 0;
}

void
mt_dev_free(const struct mt_ptr *e) {
	if (e->kind == MT_CUDA_HOST || (e->flags & MT_PTR_MAPPED))
		return;
	struct mt_dev *v = &mt_devs[e->device % MT_MAXDEV];
	mt_add(&v->frees, 1);
	mt_add(&v->free_bytes, e->size);
	mt_add(&v->live_count, -1);
	mt_add(&v->live_bytes, -(int64_t)e->size);
}

int
mt_dev_oom(int d) {
	struct mt_dev *v = &mt_devs[d % MT_MAXDEV];
	mt_add(&v->ooms, 1);
	v->used = 1;
	__atomic_store_n(&v->last_oom, MT_OOM_PENDING, __ATOMIC_RELAXED);
	return __atomic_exchange_n(&v->oom_pending, 1, __ATOMIC_RELAXED);
}

void
mt_dev_info(int d, uint64_t drv_free, uint64_t drv_total, uint64_t ms) {
	struct mt_dev *v = &mt_devs[d % MT_MAXDEV];
	v->drv_free = drv_free;
	v->drv_total = drv_total;
	v->info_ms = ms ? ms : 1;
}

void
mt_devices_json(struct mt_buf *b) {
	int first = 1;
	uint64_t now = mt_ms_since_start();
	for (int d = 0; d < MT_MAXDEV; d++) {
		struct mt_dev *v = &mt_devs[d];
		if (!v->used)
			continue;
		mt_buf_puts(b, first ? MT_KEY(MT_F_DEVICES) "[" : ",");
		first = 0;
		mt_buf_printf(b, "{" MT_KEY(MT_F_DEVICE) "%d," MT_KEY(MT_F_LIVE_BYTES) "%ld," MT_KEY(MT_F_LIVE_COUNT) "%ld,"
				 MT_KEY(MT_F_PEAK_BYTES) "%ld," MT_KEY(MT_F_ALLOCS) "%lu," MT_KEY(MT_F_FREES) "%lu," MT_KEY(MT_F_OOMS) "%lu,"
				 MT_KEY(MT_F_RECOVERED) "%lu",
			      d, (long)v->live_bytes, (long)v->live_count, (long)v->peak_bytes,
			      (unsigned long)v->allocs, (unsigned long)v->frees,
			      (unsigned long)v->ooms, (unsigned long)v->recovered);
		if (v->ooms)
			mt_buf_printf(b, "," MT_KEY(MT_F_OOM_RECOVERED) "%s",
				      v->last_oom == MT_OOM_RECOVERED ? "true" : "false");
		if (v->raised)
			mt_buf_printf(b, "," MT_KEY(MT_F_RAISED) "%lu", (unsigned long)v->raised);
		uint64_t fig[4];
		double step;
		if (torch_read(v, fig, &step)) {
			mt_buf_printf(b, "," MT_KEY(MT_F_TORCH) "{" MT_KEY(MT_F_ALLOCATED_BYTES) "%lu,"
					 MT_KEY(MT_F_RESERVED_BYTES) "%lu," MT_KEY(MT_F_ACTIVE_BYTES) "%lu,"
					 MT_KEY(MT_F_INACTIVE_SPLIT_BYTES) "%lu," MT_KEY(MT_F_STEP),
				      (unsigned long)fig[0], (unsigned long)fig[1],
				      (unsigned long)fig[2], (unsigned long)fig[3]);
			if (step == (double)(int64_t)step)
				mt_buf_i64(b, (int64_t)step);
			else
				mt_buf_double(b, step, 6);
			mt_buf_putc(b, '}');
		}
		if (v->info_ms)
			mt_buf_printf(b, "," MT_KEY(MT_F_DRIVER_FREE_BYTES) "%lu," MT_KEY(MT_F_DRIVER_TOTAL_BYTES) "%lu,"
					 MT_KEY(MT_F_DRIVER_INFO_AGE_MS) "%lu",
				      (unsigned long)v->drv_free, (unsigned long)v->drv_total,
				      (unsigned long)(now - v->info_ms));
		mt_buf_putc(b, '}');
	}
	if (!first)
		mt_buf_puts(b, "],");
}

int
mt_devices_used(void) {
	for (int k = MT_CUDA; k < MT_NKINDS; k++)
		if (__atomic_load_n(&mt_totals[k].allocs, __ATOMIC_RELAXED))
			return 1;
	for (int d = 0; d < MT_MAXDEV; d++)
		if (mt_devs[d].used)
			return 1;
	return 0;
}

void
mt_devices_postfork_child(int follow) {
	(void)follow;
	memset(mt_devs, 0, sizeof mt_devs);
}
