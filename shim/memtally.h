/*
 * memtally.h — the C API a program may call when libmemtally.so is loaded.
 * Look the symbols up with dlsym(RTLD_DEFAULT, ...) so the program runs
 * unchanged without the shim, or link against the shim directly.
 */
#ifndef MEMTALLY_H
#define MEMTALLY_H
#ifdef __cplusplus
extern "C" {
#endif

/* Write a snapshot now (reason "request", with this label) and return once
 * it is on disk: 0, or -1 if the shim is inactive or the writer did not
 * answer within 10 s.  Not from a signal handler. */
int memtally_snapshot(const char *label);

/* Record the current value of a progress counter (e.g. "step", 1200).
 * Every later snapshot carries the latest value of each mark (up to 8
 * names of up to 31 bytes), so `memtally leaks` can give growth per step.
 * With MEMTALLY_STEPS=N, a "step" mark that reaches a multiple of N asks
 * for a snapshot (reason "step"), written by memtally's own thread while
 * the caller goes on.
 * Lock-free and allocation-free: safe to call every iteration.  Returns 0,
 * or -1 when the name table is full or the name is empty. */
int memtally_mark(const char *name, double value);

/* PyTorch's CUDA caching allocator as of a step, for device (0..63):
 * bytes allocated, reserved, active and inactive-split (its own counters,
 * torch.cuda.memory_stats' "*.all.current").  Every later snapshot carries
 * the latest as `devices[].torch`.  Lock-free, allocation-free.  Returns
 * 0, or -1 for a device out of range or an inactive shim.
 * (scripts/python/memtally_cuda.py calls it at each optimizer step.) */
int memtally_torch_figures(int device, double step, unsigned long long allocated,
			   unsigned long long reserved, unsigned long long active,
			   unsigned long long inactive_split);

/* PyTorch raised OutOfMemoryError on device (from its OOM observer: the
 * requested size, its limit -- the device's total or the allowed memory --
 * and the driver's free bytes).  The OOM dump of the driver failure it
 * raised (or, when PyTorch refused without a driver failure, a dump
 * written now) is marked "raised"; its path without ".jsonl" goes to stem
 * (n bytes), where the caller writes `<stem>.torch.jsonl`.  Returns 0, 1
 * when no dump exists for it (MEMTALLY_OOM_DUMPS spent; stem ""), -1 when
 * the shim is inactive.  Not from a signal handler. */
int memtally_torch_oom(int device, unsigned long long size, unsigned long long limit,
		       unsigned long long free_bytes, char *stem, unsigned long n);

/* The process's own figures now, while the shim records it: bytes live
 * per kind and the highest live bytes since the last memtally_peak_reset
 * (or since the first call of either: the shim follows these peaks from
 * then on), per kind and for host memory (heap + mmap) and device memory
 * (cuda + cuda_managed + cuda_vmm) together.  Kinds are indexed in
 * doc/FORMAT.md's order: heap, mmap, mmap_file, cuda, cuda_host,
 * cuda_managed, cuda_vmm (nkinds of them).  size: sizeof *f, so a later,
 * longer struct stays compatible.  Lock-free, allocation-free.  Returns 0,
 * or -1 when the shim is inactive (then *f is zeroed). */
struct memtally_figures {
	unsigned nkinds;
	unsigned long long live[8], peak[8];
	unsigned long long host_live, host_peak, device_live, device_peak;
};
int memtally_figures(struct memtally_figures *f, unsigned long size);

/* Start the peaks memtally_figures reads again from the live bytes now
 * (the whole-process peaks in snapshots are untouched).  Lock-free,
 * allocation-free.  Returns 0, or -1 when the shim is inactive. */
int memtally_peak_reset(void);

#ifdef __cplusplus
}
#endif
#endif
