/*
 * devices.h — per-device figures: live, peak, allocations, frees, OOMs and
 * what became of each (recovered, or raised by PyTorch), the driver's last
 * free/total, and PyTorch's caching-allocator figures at the last step,
 * written as `"devices"` in every snapshot.  State layer: calls only the
 * platform and the tables.
 * Rules: never calls malloc; any thread (atomic counters; the PyTorch
 * figures under a sequence count, so a snapshot never mixes two steps).
 */
#ifndef MT_DEVICES_H
#define MT_DEVICES_H
#include "state/stacks.h" /* MT_MAXDEV */
#include <stdint.h>

/* What became of a device's last OOM. */
enum { MT_OOM_NONE, MT_OOM_PENDING, MT_OOM_RECOVERED, MT_OOM_RAISED };
struct mt_dev {
	int64_t live_bytes, live_count, peak_bytes;
	uint64_t allocs, frees, free_bytes, ooms, recovered, raised;
	int oom_pending;          /* an OOM not yet followed by a success */
	int last_oom;             /* MT_OOM_*: the last OOM's outcome */
	uint64_t drv_free, drv_total, info_ms; /* last cuMemGetInfo_v2 */
	int used;
	/* PyTorch's caching allocator (memtally_torch_figures): bytes
	 * allocated, reserved, active, inactive-split, and the step; seq odd
	 * while they are written, 0 while never set. */
	uint64_t tseq, tfig[4];
	double tstep;
};
extern struct mt_dev mt_devs[MT_MAXDEV];

struct mt_ptr;
/* A device allocation of size bytes of kind succeeded on device d (pinned
 * host memory is left out: it counts in the kind totals only); when the
 * device's live bytes reach a new high its peak epoch moves (totals.h),
 * so the caller charges the call site first.  Unless
 * kind is MT_CUDA_VMM, the same as mt_dev_settle after it. */
int mt_dev_alloc(int d, int kind, uint64_t size);
/* Memory on d became usable (an allocation, or a VMM mapping: a
 * cuMemCreate alone is not, as PyTorch's expandable segments make every
 * handle of a growth before mapping any, and release them all when one
 * fails).  Returns 1 when it was the first after an OOM on d (recovered). */
int mt_dev_settle(int d);
/* The allocation e was freed (mappings of a handle are not charged). */
void mt_dev_free(const struct mt_ptr *e);
/* An allocation on d failed with out-of-memory.  Returns 1 when the last
 * OOM on d was still pending (no success since: this is its retry). */
int mt_dev_oom(int d);
/* PyTorch raised OutOfMemoryError on d: the pending OOM (if any) is
 * settled as raised, not recovered.  Returns 1 when one was pending. */
int mt_dev_raised(int d);
/* PyTorch's caching-allocator figures for d after step. */
void mt_dev_torch(int d, double step, const uint64_t fig[4]);
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
