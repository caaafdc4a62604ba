/* torchfig.h — PyTorch's caching allocator over a window of snapshots
 * (devices[].torch, sent at each optimizer step by _memtally/cuda.py):
 * tensors (allocated bytes) told from the cache (reserved - allocated)
 * and from fragmentation (inactive split bytes: free blocks inside
 * segments that also hold tensors, which empty_cache cannot return). */
#ifndef MTA_TORCHFIG_H
#define MTA_TORCHFIG_H
#include "model/model.h"
#include "base/util.h"

struct torchfig {
	int device;
	struct devtorch first, last; /* at the window's first and last snapshots with them */
	size_t n;                    /* snapshots in the window with them */
};
/* The figures of each device over snapshots [lo, end) of f (up to max
 * devices); 0 when none carries them. */
size_t answer_torchfigs(const struct mfile *f, size_t lo, size_t end, struct torchfig *out, size_t max);
/* "cuda:0 steps 1-6: tensors 156 MiB (+31.6 MiB, 6.3 MiB/step), cache 48 MiB
 * (+22 MiB), fragmented 44 MiB (+30 MiB): the cache grows most". */
const char *torchfig_text(const struct torchfig *t, char *buf, size_t n);
/* `[{"device":0,"first":{...},"last":{...}}]` */
void torchfig_json(struct sb *j, const struct torchfig *t, size_t n);

#endif
