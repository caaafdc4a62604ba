/* join.h — a CUDA OOM dump joined with PyTorch's snapshot of the same
 * moment (read/torchsnap.h): each of torch's segments with the driver
 * allocations under it and its blocks; the driver allocations in no torch
 * segment, named by the library that made them; and the totals, which
 * reconcile: torch allocated + torch cached + outside torch = driver live
 * (exactly when every byte of torch's segments has a driver allocation
 * under it: `mismatch` says by how much it has not). */
#ifndef MTA_JOIN_H
#define MTA_JOIN_H
#include "model/model.h"
#include "read/torchsnap.h"

struct jseg {                 /* one of torch's segments */
	const struct tseg *t;
	int64_t allocated, pending, inactive; /* its blocks by state */
	int64_t drv_bytes;        /* driver bytes under it */
	size_t *drv, ndrv;        /* the dump's segments under it (indexes) */
	size_t *blocks, nblocks;  /* its blocks (tsnap indexes), largest first */
};

struct jout {                 /* device memory in no torch segment */
	size_t seg;               /* the dump's segment, or SIZE_MAX: VMM handles' bytes no mapping shows */
	int64_t bytes;
	const char *owner;        /* "NCCL", "cuBLAS", ...; NULL: another */
};

struct join {
	int device;
	int64_t allocated, pending, cached, reserved; /* torch's, on device */
	int64_t live;             /* the driver's live device bytes (memtally) */
	int64_t inside, outside;  /* of live: under torch's segments, and not */
	int64_t mismatch;         /* reserved - inside: 0 when it reconciles */
	int64_t unmapped;         /* VMM handles' bytes no listed mapping shows */
	int64_t pinned;           /* pinned host memory (not device memory) */
	int64_t driver_used;      /* the driver's total - free at the dump, -1 unknown */
	struct jseg *segs;        /* largest first */
	size_t nsegs;
	struct jout *outs;        /* largest first */
	size_t nouts;
};

/* The join on the dump's device. */
struct join *join_compute(const struct mfile *f, const struct tsnap *t);
void join_free(struct join *j);
/* The library a stack's allocation came from, by the module of its
 * innermost frame in a known one (libnccl: "NCCL", libcublas[Lt]:
 * "cuBLAS", libcudnn: "cuDNN", ...), or NULL. */
const char *join_owner(const struct mfile *f, uint32_t stack);

#endif
