/*
 * cuda.h — CUDA driver allocations (cuda.c), reached three ways: the
 * exported entry points (programs linked with -lcuda), dlsym on the
 * driver's handle (cudart, NCCL, cuBLAS, PyTorch, XLA), and
 * cuGetProcAddress[_v2] including its self-lookup.
 * Rules: never calls malloc; wrappers run in the program's threads with
 * the re-entry guard held around the driver call and the recording.
 */
#ifndef MT_CUDA_H
#define MT_CUDA_H
#include <stdint.h>

struct mt_buf;
/* Per-device figures for the snapshot: `"devices":[...],` when CUDA was
 * used.  Never allocates. */
void mt_cuda_json(struct mt_buf *b);
/* Read MEMTALLY_CUDA_ROUTES-style bits (config) at start. */
void mt_cuda_init(void);
void mt_cuda_postfork_child(void);
/* Whether this process allocated through the driver at all. */
int mt_cuda_used(void);

/* Key tags: device allocations and handles share the pointer table with
 * host blocks; the top bits keep them apart. */
#define MT_TAG_DEV (1ull << 63)     /* device (and managed, pinned) pointers */
#define MT_TAG_HANDLE (3ull << 62)  /* cuMemCreate handles, CUarrays */
#define MT_TAG_MASK (3ull << 62)
enum { MT_PTR_MAPPED = 1, MT_PTR_HANDLE = 2 }; /* struct mt_ptr flags */

#endif
