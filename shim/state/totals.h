/*
 * totals.h — the process's exact totals per kind, the heap's counts per
 * thread slot, and the epoch that says a kind's total reached a new high.
 * Rules: never calls malloc; may run inside malloc, in any thread.  Every
 * update is an atomic add.  Async-signal-safe.
 */
#ifndef MT_TOTALS_H
#define MT_TOTALS_H
#include "state/stacks.h"
#include "state/phases.h"
#include <stdint.h>

/* Process-wide exact totals per kind. */
struct mt_totals {
	int64_t live_bytes;   /* exact requested bytes live (exact mode) */
	int64_t live_count;   /* exact */
	uint64_t allocs;      /* exact */
	uint64_t alloc_bytes; /* exact */
	uint64_t frees;       /* exact */
	uint64_t free_bytes;  /* exact where the size is known */
	int64_t peak_bytes;   /* highest live_bytes */
};
extern struct mt_totals mt_totals[MT_NKINDS];
/* Heap call counts per thread slot, so the hottest counters are not one
 * cache line shared by every thread; snapshots add the slots up (threads
 * beyond MT_TSLOTS share slots, still exactly, with atomic adds). */
struct mt_tcount {
	uint64_t allocs, alloc_bytes, frees;
	uint64_t live_count; /* (two's complement) sums of +1/-1 */
	uint64_t free_bytes;
	/* Heap bytes this slot's owner allocated (less those it freed) not
	 * yet added to mt_totals[MT_HEAP].live_bytes: once threads record
	 * (not the solo thread's plain path), each owner keeps its change
	 * here while it stays within MT_HEAP_SLACK either way, so the shared
	 * line is written once per 64 KiB of change, not at every malloc
	 * and free (2 threads: a locked add on that line was 13% of the
	 * exact malloc bench).  The heap's live bytes, summed with every
	 * slot's pending (mt_heap_counts), stay exact; its peak is raised when
	 * a slot adds its pending, and by each snapshot to the live bytes it
	 * reads, so it is exact while one thread records and within
	 * MT_HEAP_SLACK x the threads recording otherwise (and those that
	 * ended since the last snapshot: doc/FORMAT.md).  An allocation of MT_HEAP_SLACK or more is added
	 * at once: a spike's size is never held back. */
	int64_t live_pending;
	/* pid << 32 | tid of the thread that owns the slot (0: none, or the
	 * shared last slot): the shim is told of no thread's end (design.md),
	 * so the writer folds the pending bytes of a slot whose owner is gone
	 * (mt_heap_counts) */
	uint64_t owner;
	uint64_t pad[1];
} __attribute__((aligned(64)));
#define MT_HEAP_SLACK (64 << 10)
#define MT_TSLOTS 256
extern struct mt_tcount mt_tcounts[MT_TSLOTS];
/* The heap's counts, the slots summed into *t (allocs, alloc_bytes,
 * frees, live_count, free_bytes, and each slot's pending live bytes
 * added to live_bytes; the peak raised to live_bytes if below).  The
 * pending bytes of a slot whose owner ended go to the shared figure
 * first (a tgkill a slot holding some).  For the writer. */
void mt_heap_counts(struct mt_totals *t);
/* The slots' pending heap live bytes, summed (racy reads, each whole). */
int64_t mt_heap_pending(void);
/* Exact process totals: an allocation of bytes; a release of bytes (whole:
 * the allocation is gone, counted as a free).  Async-signal-safe. */
void mt_totals_alloc(int kind, uint64_t bytes);
void mt_totals_free(int kind, uint64_t bytes, int whole);

/* Bumped when a peak moves, one a slot (stacks.h: mt_peak_slot): a
 * kind's total live bytes, or a device's (devices.c), reached a new high.
 * Hidden: every charge reads it (sites.c), PC-relative. */
extern MT_HIDDEN uint32_t mt_peak_epoch[MT_PEAK_SLOTS];
/* The peak of slot reached a new high: bump its epoch.  The caller
 * charged the site first, so the site that made the peak counts in it. */
static inline void
mt_peak_moved(int slot) {
	__atomic_add_fetch(&mt_peak_epoch[slot], 1, __ATOMIC_RELAXED);
	/* the phase and step it moved in (phases.h): two loads, two stores */
	__atomic_store_n(&mt_peak_phase[slot], __atomic_load_n(&mt_phase_now, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&mt_peak_step[slot], __atomic_load_n(&mt_step_now, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
}
/* Peaks since the last mt_since_reset (memtally_peak_reset, entry/api.c):
 * one a kind, then host memory (heap + mmap) and device memory (cuda +
 * cuda_managed + cuda_vmm) together, the sums the writer uses.  Raised
 * beside the kinds' own peaks (mt_totals_alloc, charge.c's heap path)
 * once the first reset set mt_since_on: until then one load and a branch
 * an allocation (a program that never asks pays no more), after it a few
 * relaxed loads and compares unless a peak moves.  Async-signal-safe. */
enum { MT_SINCE_HOST = MT_NKINDS, MT_SINCE_DEV, MT_NSINCE };
extern MT_HIDDEN int64_t mt_since_peak[MT_NSINCE];
extern MT_HIDDEN int mt_since_on;
/* The live bytes a since-peak slot follows (a kind, or a sum). */
static inline int64_t
mt_since_live(int slot) {
#define MT_LIVE_(k) __atomic_load_n(&mt_totals[k].live_bytes, __ATOMIC_RELAXED)
	if (slot == MT_SINCE_HOST)
		return MT_LIVE_(MT_HEAP) + MT_LIVE_(MT_MMAP);
	if (slot == MT_SINCE_DEV)
		return MT_LIVE_(MT_CUDA) + MT_LIVE_(MT_CUDA_MANAGED) + MT_LIVE_(MT_CUDA_VMM);
	return MT_LIVE_(slot);
#undef MT_LIVE_
}
static inline void
mt_since_put(int plain, int slot, int64_t live) {
	int64_t *p = &mt_since_peak[slot];
	if (live <= __atomic_load_n(p, __ATOMIC_RELAXED))
		return;
	if (plain)
		__atomic_store_n(p, live, __ATOMIC_RELAXED);
	else
		mt_raise_peak(p, live);
}
/* kind's live bytes became live: raise its since-peak and its sum's.
 * plain: the solo thread's plain store (state/solo.h). */
static inline void
mt_since_raise(int plain, int kind, int64_t live) {
	if (MT_LIKELY(!__atomic_load_n(&mt_since_on, __ATOMIC_RELAXED)))
		return;
	mt_since_put(plain, kind, live);
	if (kind == MT_HEAP || kind == MT_MMAP)
		mt_since_put(plain, MT_SINCE_HOST, mt_since_live(MT_SINCE_HOST));
	else if (kind == MT_CUDA || kind == MT_CUDA_MANAGED || kind == MT_CUDA_VMM)
		mt_since_put(plain, MT_SINCE_DEV, mt_since_live(MT_SINCE_DEV));
}
/* Every since-peak to the live bytes now; they are followed from the
 * first call on. */
void mt_since_reset(void);

/* A fork child's totals, counts and epochs start from zero. */
void mt_totals_reset(void);

#endif
