/*
 * oom.h — failure dumps (the event ring they carry is events.h).  When a tracked
 * allocation fails with ENOMEM the failing thread writes
 * <name>.oom<N>.jsonl before the error reaches the program; the writer
 * thread writes a "preoom" dump when cgroup usage crosses MEMTALLY_PREOOM.
 * Rules: never calls malloc; a dump allocates nothing at all (its buffers
 * are reserved at start) and takes only the dump lock (try-lock: a second
 * thread failing at the same moment does not wait) and, briefly, each table
 * lock while listing segments.
 */
#ifndef MT_OOM_H
#define MT_OOM_H
#include <stddef.h>
#include <stdint.h>

/* Reserve the event ring (MEMTALLY_TRACE entries) and dump buffers.  0 or ENOMEM. */
int mt_oom_init(void);
/* A host allocation failed with ENOMEM: dump, then return.  api: "malloc",
 * "mmap", ...  Never allocates. */
void mt_oom_host(const char *api, uint64_t requested);
/* A CUDA allocation failed with CUDA_ERROR_OUT_OF_MEMORY: dump (device
 * segments), then return.  Never allocates. */
void mt_oom_cuda(const char *api, uint64_t requested, int device, uint64_t drv_free,
		 uint64_t drv_total);
/* Writer thread: check cgroup usage against MEMTALLY_PREOOM; dump once per
 * crossing.  Returns 1 when it dumped. */
int mt_preoom_check(void);
/* MEMTALLY_OOM_RENDER=1, on the writer thread: run `memtally torch`,
 * `html` and `flame` on the dumps written since the last call, each next
 * to its dump (the analysis command beside the shim, or ../bin).  wait:
 * at exit, wait for renders the writer thread has started. */
void mt_oom_render(int wait);
/* fork child: counts and the ring start over. */
void mt_oom_postfork_child(int follow);

#endif
