/*
 * oom.h — failure dumps (the event ring they carry is events.h).  When a tracked
 * allocation fails with ENOMEM the failing thread writes
 * <name>.oom<N>.jsonl before the error reaches the program; the writer
 * thread writes a "preoom" dump when cgroup usage crosses MEMTALLY_PREOOM.
 * A CUDA dump's outcome (recovered, failed_again, raised) is appended to
 * it when known.
 * Rules: never calls malloc; a dump allocates nothing at all (its buffers
 * are reserved at start) and takes only the dump lock (try-lock: a second
 * thread failing at the same moment does not wait) and, briefly, each table
 * lock while listing segments and the pending-outcome lock; an outcome
 * takes only that lock (blocking: held for one open, write and close of a
 * dump file, never around a call out of the shim; taken inside the dump
 * lock, never the other way round).
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
/* A hook's real call failed: mt_oom_host when errno is ENOMEM; errno is
 * kept. */
void mt_oom_host_failed(const char *api, uint64_t requested);
/* A CUDA allocation failed with CUDA_ERROR_OUT_OF_MEMORY: dump (device
 * segments), then return.  retry: the device's last failure had no
 * success after it (its dump's outcome: failed_again).  Never allocates. */
void mt_oom_cuda(const char *api, uint64_t requested, int device, uint64_t drv_free,
		 uint64_t drv_total, int retry);
/* The first success on device after a failure: its dump's outcome is
 * recovered. */
void mt_oom_cuda_recovered(int device);
/* PyTorch raised OutOfMemoryError on device (its OOM observer: size,
 * limit = total or allowed memory, the driver's free bytes): the pending
 * failure's dump is settled as raised; with no driver failure pending (a
 * PyTorch limit) a dump is written now.  0 and that dump's path without
 * ".jsonl" in stem, or 1 when there is no dump (MEMTALLY_OOM_DUMPS spent). */
int mt_oom_torch(int device, uint64_t size, uint64_t limit, uint64_t drv_free, char *stem,
		 size_t n);
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
