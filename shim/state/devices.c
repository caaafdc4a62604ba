/*
 * devices.c — per-device figures (devices.h).
 */
#include "platform/glue.h"
#include "state/devices.h"
#include "platform/buf.h"
#include "state/ptrtab.h"
#include "state/sites.h"
#include <string.h>

struct mt_dev mt_devs[MT_MAXDEV];

void
mt_dev_alloc(int d, int kind, uint64_t size) {
	if (kind == MT_CUDA_HOST)
		return; /* host memory: in the kind totals only */
	struct mt_dev *v = &mt_devs[d % MT_MAXDEV];
	v->used = 1;
	mt_add(&v->allocs, 1);
	mt_add(&v->live_count, 1);
	mt_raise_peak(&v->peak_bytes, mt_add(&v->live_bytes, (int64_t)size));
	if (__atomic_exchange_n(&v->oom_pending, 0, __ATOMIC_RELAXED))
		mt_add(&v->recovered, 1); /* a success after an OOM */
}

void
mt_dev_free(const struct mt_ptr *e) {
	if (e->kind == MT_CUDA_HOST || (e->flags & MT_PTR_MAPPED))
		return;
	struct mt_dev *v = &mt_devs[e->device % MT_MAXDEV];
	mt_add(&v->frees, 1);
	mt_add(&v->live_count, -1);
	mt_add(&v->live_bytes, -(int64_t)e->size);
}

void
mt_dev_oom(int d) {
	struct mt_dev *v = &mt_devs[d % MT_MAXDEV];
	mt_add(&v->ooms, 1);
	v->used = 1;
	__atomic_store_n(&v->oom_pending, 1, __ATOMIC_RELAXED);
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
				      v->oom_pending ? "false" : "true");
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
