/* torchsnap.h — PyTorch's own snapshot at a CUDA OOM: the file
 * `<dump>.torch.jsonl` that scripts/python/_memtally/cuda.py writes beside
 * the OOM dump it pairs with (doc/FORMAT.md, "PyTorch's snapshot"):
 * torch.cuda.memory._snapshot()'s segments, blocks and trace entries,
 * their frames and stacks written once each. */
#ifndef MTA_TORCHSNAP_H
#define MTA_TORCHSNAP_H
#include "model/model.h"
#include <stddef.h>
#include <stdint.h>

enum { TB_ALLOCATED, TB_PENDING, TB_INACTIVE };

struct tframe {
	char *file, *name;
	int line;
};
struct tstack {
	uint32_t *frames;    /* tframe indexes, innermost first */
	int n;
};
struct tblock {
	uint64_t addr, size, requested;
	int state;           /* TB_*: active_allocated; active_pending_free (or
			      * any other active state); inactive */
	uint32_t stack;      /* tstack index, 0: none */
	uint32_t seg;        /* its segment's index */
};
struct tseg {
	int device, expandable;
	uint64_t addr, size;
	int64_t stream;
	char type[8];        /* small, large */
	uint32_t stack;
	size_t block0, nblocks; /* its blocks: blocks[block0 .. block0+nblocks) */
};
struct ttrace {
	int device;
	char action[16];     /* alloc, free_requested, free_completed, segment_alloc, ... */
	uint64_t addr, size;
	int64_t stream, time_us, device_free; /* device_free: oom only, else -1 */
	uint32_t stack;
};
struct tsnap {
	char *path;
	char torch[32];      /* torch.__version__ */
	int64_t device, size, limit, free_bytes, history; /* the OOM observer's arguments */
	/* indexed from 1 (0: none), in file order */
	struct tframe *frames;
	size_t nframes, cap_frames;
	struct tstack *stacks;
	size_t nstacks, cap_stacks;
	struct tseg *segs;
	size_t nsegs, cap_segs;
	struct tblock *blocks;
	size_t nblocks, cap_blocks;
	struct ttrace *traces;
	size_t ntraces, cap_traces;
};

/* Read path; a bad record exits 1 with "FILE:LINE: reason". */
struct tsnap *tsnap_load(const char *path);
/* The snapshot paired with dump f (its outcome names it, or
 * `<dump without .jsonl>.torch.jsonl` exists), or NULL. */
struct tsnap *tsnap_for_dump(const struct mfile *f);
void tsnap_free(struct tsnap *t);
/* The line to show for a stack: the innermost frame outside torch's own
 * package (a path with a "/torch/" folder), else the innermost;
 * "file:line name" in buf ("" for no stack). */
const char *tsnap_line(const struct tsnap *t, uint32_t stack, char *buf, size_t n);

#endif
