/*
 * memtally.h — the C API a program may call; it costs nothing and records
 * nothing without the shim.  Include this header and call the functions:
 * do NOT link -lmemtally (that would load the shim, and record, in every
 * plain run).  Each function is a weak reference to the shim's symbol
 * behind an inline wrapper (a macro of the same name) that calls it only
 * when the shim is loaded (`memtally run`, LD_PRELOAD=libmemtally.so) and
 * otherwise returns -1 (a compare and, bare, a load): a program built with
 * marks runs unchanged bare and reports its marks when preloaded (PIE or
 * not, C or C++, gcc or clang: test_cuts 'capi').
 *
 * Adding a function: declare it below with MEMTALLY_FN, then give it a
 * wrapper (memtally_call_<name>_, through MEMTALLY_RESOLVE_) and a macro of
 * its name, as memtally_mark has.  The shim's own source
 * defines MEMTALLY_SHIM before including this header, which then declares
 * the plain functions it defines.
 */
#ifndef MEMTALLY_H
#define MEMTALLY_H
#ifdef __cplusplus
extern "C" {
#endif

#ifdef MEMTALLY_SHIM
#define MEMTALLY_FN /* the shim: the definitions */
#else
#define MEMTALLY_FN __attribute__((weak)) /* a program: the shim's, when loaded */
#endif

/* Write a snapshot now (reason "request", with this label) and return once
 * it is on disk: 0, or -1 if the shim is inactive or the writer did not
 * answer within 10 s.  Not from a signal handler. */
MEMTALLY_FN int memtally_snapshot(const char *label);

/* Record the current value of a progress counter (e.g. "step", 1200).
 * Every later snapshot carries the latest value of each mark (up to 8
 * names of up to 31 bytes), so `memtally leaks` can give growth per step.
 * With MEMTALLY_STEPS=N, a "step" mark that reaches a multiple of N asks
 * for a snapshot (reason "step"), written by memtally's own thread while
 * the caller goes on.
 * Lock-free and allocation-free: safe to call every iteration.  Returns 0,
 * or -1 when the name table is full or the name is empty. */
MEMTALLY_FN int memtally_mark(const char *name, double value);

/* Begin (begin 1) or end (begin 0) a phase of the program: "checkpoint
 * save", "eval", "rollout" (up to 16 names of up to 31 bytes; phases
 * nest, 8 deep).  Every snapshot names the innermost phase open at it,
 * lists the spans that ended since the previous one (begin and end, ms,
 * and the step), and each kind's peak says the phase it was reached in:
 * `memtally report` says "during checkpoint save at step 300".  Under
 * `memtally run` a PyTorch program's checkpoints, evaluations, batches,
 * backward passes and optimizer steps are phases without code
 * (doc/python.md).  A short lock, no allocation: any thread, every step.
 * Returns 0, or -1 (an empty name, a full table, an end of a phase that
 * is not open). */
MEMTALLY_FN int memtally_phase(const char *name, int begin);

/* What the current step works on, as one JSON object on one line (at
 * most 1023 bytes): {"tokens":4096,"batch_bytes":32768,"shapes":[[8,512]]}.
 * Every later snapshot carries the latest as `workload`; `memtally leaks`
 * regresses a row's live bytes on its numbers ("tokens" and "batch_bytes"
 * first) and says "follows the workload" instead of calling it a leak.
 * Set it before the step's mark.  Returns 0, or -1 when refused. */
MEMTALLY_FN int memtally_workload(const char *json_object);

/* PyTorch's CUDA caching allocator as of a step, for device (0..63):
 * bytes allocated, reserved, active and inactive-split (its own counters,
 * torch.cuda.memory_stats' "*.all.current").  Every later snapshot carries
 * the latest as `devices[].torch`.  Lock-free, allocation-free.  Returns
 * 0, or -1 for a device out of range or an inactive shim.
 * (scripts/python/memtally_cuda.py calls it at each optimizer step.) */
MEMTALLY_FN int memtally_torch_figures(int device, double step, unsigned long long allocated,
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
MEMTALLY_FN int memtally_torch_oom(int device, unsigned long long size, unsigned long long limit,
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
MEMTALLY_FN int memtally_figures(struct memtally_figures *f, unsigned long size);

/* Start the peaks memtally_figures reads again from the live bytes now
 * (the whole-process peaks in snapshots are untouched).  Lock-free,
 * allocation-free.  Returns 0, or -1 when the shim is inactive. */
MEMTALLY_FN int memtally_peak_reset(void);

/* Which call site owns the block that starts at addr: a live heap block
 * the shim tracks (malloc, calloc, realloc, the aligned family), whose
 * stack id (the file's "stack") goes to *stack_id.  Returns 0, 1 when no
 * tracked live block starts there (or it was not sampled), -1 when the
 * shim is inactive.  Takes one of the pointer table's shard locks for the
 * look, none across a call out; allocation-free.  (The Python hook's
 * "why is it still alive" search, _memtally/why.py, maps objects so.) */
MEMTALLY_FN int memtally_owner(const void *addr, unsigned *stack_id);

/* The live bytes of call site stack_id now (the figure a snapshot's row
 * would show), to *live_bytes.  Lock-free, allocation-free.  Returns 0,
 * 1 for an id the shim has not given out, -1 when the shim is inactive. */
MEMTALLY_FN int memtally_site_live(unsigned stack_id, long long *live_bytes);

/* Append one record (a JSON object on one line, without its newline) to
 * the process's file between snapshots.  The shim checks only its shape:
 * it starts with '{', ends with '}', holds no newline, and is at most
 * 65536 bytes; readers ignore record types they do not know (doc/FORMAT.md
 * lists the "kept" record the Python hook writes).  Returns 0, 1 for a
 * line refused, -1 when the shim is inactive or the file cannot be
 * written (closed after the exit snapshot, below the disk floor).  Not
 * from a signal handler. */
MEMTALLY_FN int memtally_record(const char *json_line);

/* A warning of the program's memtally code (the Python hook's), said as
 * the shim says its own: a warning record in the file (memtally run prints
 * each distinct one once at the end), and on stderr the first warning of
 * the process only, none with MEMTALLY_QUIET=1.  message: one line, cut
 * at 255 bytes.  Returns 0, -1 when the shim is inactive.  Never
 * allocates. */
MEMTALLY_FN int memtally_warn(const char *message);

/* The wrappers: the shim's function when it is loaded, else -1.  The weak
 * reference answers at no cost where the program is position-independent
 * (gcc's default on Debian and most distributions); a non-PIE executable's
 * linker settles a weak reference to "absent" at link time, so where it
 * reads absent the symbol is looked up once with dlsym (glibc 2.34 and
 * later have it in libc; older ones need -ldl) and the answer kept: the
 * first call of each function in a file is not for a signal handler.
 * Defined after the declarations, so inside each the name is still the
 * symbol. */
#ifndef MEMTALLY_SHIM
#include <dlfcn.h>
/* name's address in the process, or NULL; *cache keeps the answer */
static inline void *
memtally_find_(const char *name, void **cache) {
	static char absent;
	void *p = __atomic_load_n(cache, __ATOMIC_RELAXED);
	if (!p) {
		p = dlsym((void *)0 /* RTLD_DEFAULT */, name);
		__atomic_store_n(cache, p ? p : (void *)&absent, __ATOMIC_RELAXED);
	}
	return p == (void *)&absent ? (void *)0 : p;
}
/* fn's address (the weak reference, else dlsym), as fn's own type */
#define MEMTALLY_RESOLVE_(fn)                                                                  \
	__extension__({                                                                        \
		static void *memtally_cache_;                                                  \
		fn ? &fn : (__typeof__(&fn))memtally_find_(#fn, &memtally_cache_);               \
	})
static inline int
memtally_call_snapshot_(const char *label) {
	__typeof__(&memtally_snapshot) f = MEMTALLY_RESOLVE_(memtally_snapshot);
	return f ? f(label) : -1;
}
static inline int
memtally_call_mark_(const char *name, double value) {
	__typeof__(&memtally_mark) f = MEMTALLY_RESOLVE_(memtally_mark);
	return f ? f(name, value) : -1;
}
static inline int
memtally_call_phase_(const char *name, int begin) {
	__typeof__(&memtally_phase) f = MEMTALLY_RESOLVE_(memtally_phase);
	return f ? f(name, begin) : -1;
}
static inline int
memtally_call_workload_(const char *json_object) {
	__typeof__(&memtally_workload) f = MEMTALLY_RESOLVE_(memtally_workload);
	return f ? f(json_object) : -1;
}
static inline int
memtally_call_torch_figures_(int device, double step, unsigned long long allocated,
			     unsigned long long reserved, unsigned long long active,
			     unsigned long long inactive_split) {
	__typeof__(&memtally_torch_figures) f = MEMTALLY_RESOLVE_(memtally_torch_figures);
	return f ? f(device, step, allocated, reserved, active, inactive_split) : -1;
}
static inline int
memtally_call_torch_oom_(int device, unsigned long long size, unsigned long long limit,
			 unsigned long long free_bytes, char *stem, unsigned long n) {
	__typeof__(&memtally_torch_oom) f = MEMTALLY_RESOLVE_(memtally_torch_oom);
	return f ? f(device, size, limit, free_bytes, stem, n) : -1;
}
static inline int
memtally_call_figures_(struct memtally_figures *fig, unsigned long size) {
	__typeof__(&memtally_figures) f = MEMTALLY_RESOLVE_(memtally_figures);
	return f ? f(fig, size) : -1;
}
static inline int
memtally_call_peak_reset_(void) {
	__typeof__(&memtally_peak_reset) f = MEMTALLY_RESOLVE_(memtally_peak_reset);
	return f ? f() : -1;
}
static inline int
memtally_call_owner_(const void *addr, unsigned *stack_id) {
	__typeof__(&memtally_owner) f = MEMTALLY_RESOLVE_(memtally_owner);
	return f ? f(addr, stack_id) : -1;
}
static inline int
memtally_call_site_live_(unsigned stack_id, long long *live_bytes) {
	__typeof__(&memtally_site_live) f = MEMTALLY_RESOLVE_(memtally_site_live);
	return f ? f(stack_id, live_bytes) : -1;
}
static inline int
memtally_call_record_(const char *json_line) {
	__typeof__(&memtally_record) f = MEMTALLY_RESOLVE_(memtally_record);
	return f ? f(json_line) : -1;
}
static inline int
memtally_call_warn_(const char *message) {
	__typeof__(&memtally_warn) f = MEMTALLY_RESOLVE_(memtally_warn);
	return f ? f(message) : -1;
}
#define memtally_warn(message) memtally_call_warn_(message)
#define memtally_owner(addr, id) memtally_call_owner_(addr, id)
#define memtally_site_live(id, live) memtally_call_site_live_(id, live)
#define memtally_record(line) memtally_call_record_(line)
#define memtally_figures(fig, size) memtally_call_figures_(fig, size)
#define memtally_peak_reset() memtally_call_peak_reset_()
#define memtally_snapshot(label) memtally_call_snapshot_(label)
#define memtally_mark(name, value) memtally_call_mark_(name, value)
#define memtally_phase(name, begin) memtally_call_phase_(name, begin)
#define memtally_workload(json) memtally_call_workload_(json)
#define memtally_torch_figures(d, s, al, re, ac, in) memtally_call_torch_figures_(d, s, al, re, ac, in)
#define memtally_torch_oom(d, sz, lim, fr, stem, n) memtally_call_torch_oom_(d, sz, lim, fr, stem, n)
#endif

#ifdef __cplusplus
}
#endif
#endif
