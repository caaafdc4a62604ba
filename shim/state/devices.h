/*
 * devices.h — per-device figures: live, peak, allocations, frees, OOMs and
 * recoveries, and the driver's last free/total, written as `"devices"` in
 * every snapshot.  State layer: calls only the platform and the tables.
 * Rules: never calls malloc; any thread (atomic counters).
 */
#ifndef MT_DEVICES_H
#define MT_DEVICES_H
#include <stdint.h>

#define MT_MAXDEV 64
struct mt_dev {
	int64_t live_bytes, live_count, peak_bytes;
	uint64_t allocs, frees, ooms, recovered;
	int oom_pending;          /* an OOM not yet followed by a success */
	uint64_t drv_free, drv_total, info_ms; /* last cuMemGetInfo_v2 */
	int used;
};
extern struct mt_dev mt_devs[MT_MAXDEV];

struct mt_ptr;
/* A device allocation of size bytes of kind succeeded on device d (pinned
 * host memory is left out: it counts in the kind totals only). */
void mt_dev_alloc(int d, int kind, uint64_t size);
/* The allocation e was freed (mappings of a handle are not charged). */
void mt_dev_free(const struct mt_ptr *e);
/* An allocation on d failed with out-of-memory. */
void mt_dev_oom(int d);
/* The driver's free/total for d, as of ms since start. */
void mt_dev_info(int d, uint64_t drv_free, uint64_t drv_total, uint64_t ms);

struct mt_buf;
/* `"devices":[...],` when any device was used.  Never allocates. */
void mt_devices_json(struct mt_buf *b);
/* Whether this process allocated through the driver at all. */
int mt_devices_used(void);
/* fork child: the figures start over. */
void mt_devices_postfork_child(int follow);

#endif
