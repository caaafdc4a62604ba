/*
 * sites.h — stacks and call sites.  A stack of return addresses is
 * deduplicated to a stack id; each (stack id, kind) keeps live bytes and
 * count, allocations, allocated bytes, frees and peak live bytes.
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  Lookups are lock-free; inserting a new stack takes the stack lock.
 */
#ifndef MT_SITES_H
#define MT_SITES_H
#include <stdint.h>
#include "format.h"

#define MT_KIND_ENUM_(e, n) MT_##e,
enum mt_kind { MT_KINDS(MT_KIND_ENUM_) MT_NKINDS };
#undef MT_KIND_ENUM_
extern const char *const mt_kind_names[MT_NKINDS];

/* 64 bytes: the live count is allocs - frees (every charge moves them
 * together), so it costs no atomic of its own on the hot path and no
 * 8 bytes in each of a PyTorch process's 700 k sites. */
struct mt_site {
	int64_t live_bytes;   /* bytes allocated and not yet freed */
	uint64_t allocs;      /* allocations ever */
	uint64_t alloc_bytes; /* bytes ever allocated */
	uint64_t frees;       /* frees ever */
	int64_t peak_bytes;   /* highest live_bytes seen */
	/* live_bytes when its kind's total last reached its high-water mark:
	 * saved at the site's first change after the mark moved (epoch
	 * differs), so the hot path pays one compare; when the site has not
	 * changed since, its figure at the peak is live_bytes itself. */
	int64_t atpeak_bytes;
	uint32_t atpeak_epoch;
	/* When peak_bytes was reached, to within 1/16 of it: stamped (ms
	 * since start + 1, and the "step" mark then + 1; 0: none) at a raise by
	 * 1/16 or more, or by an allocation of MT_SITE_BIG or more, so a
	 * site that grows in small steps reads the clock a few hundred times
	 * in all.  Shared figures only. */
	uint32_t peak_ms;
	int32_t peak_step;
};
/* An allocation this large raises its site's peak exactly however many
 * threads charge the site (sites.c: charge_big). */
#define MT_SITE_BIG (256 << 10)
/* Bumped when a kind's total live bytes reach a new high (one per kind). */
extern uint32_t mt_peak_epoch[];
/* A site's live bytes at its kind's peak (see atpeak_bytes). */
static inline int64_t
mt_site_at_peak(const struct mt_site *s, int kind) {
	return s->atpeak_epoch == __atomic_load_n(&mt_peak_epoch[kind], __ATOMIC_RELAXED)
		       ? s->atpeak_bytes
		       : s->live_bytes;
}
/* Allocations not yet freed. */
static inline int64_t
mt_site_live_count(const struct mt_site *s) {
	return (int64_t)(s->allocs - s->frees);
}
/* A kind's total reached a new high at live: bump its epoch.  The caller
 * charged the site first, so the site that made the peak counts in it. */
static inline void
mt_peak_moved(int kind) {
	__atomic_add_fetch(&mt_peak_epoch[kind], 1, __ATOMIC_RELAXED);
}

/* A stack id names (frames, kind): each id is one call site, so a site
 * costs one set of figures, not one per kind.  Ids 0 .. MT_NKINDS-1 are
 * the unknown stack of each kind (no frames captured, or the stack table
 * was full: counted in mt_sites_dropped); files call them all stack 0. */
int mt_sites_init(uint64_t max_stacks, int depth);
/* Id for (pcs[0..n), Python stack py, kind); the kind's unknown id when
 * the table is full or there is neither a frame nor a Python stack.
 * Takes the stack lock on a miss only.  Never allocates. */
uint32_t mt_stack_intern(const uintptr_t *pcs, int n, int kind, uint32_t py);
/* The same for a stack of one frame, through a per-thread cache keyed by
 * the frame.  Never allocates. */
uint32_t mt_stack_intern1(uintptr_t pc, int kind, uint32_t py);
/* The Python stack id (python.h) a stack was captured with; 0 = none. */
uint32_t mt_stack_py(uint32_t id);
/* How a stack is kept: its own innermost *nown frames (returned), then
 * the outermost *keep frames of stack *up (an earlier id; 0 and 0 when
 * it holds all its frames).  up's own up shares fewer than *keep. */
const uintptr_t *mt_stack_own(uint32_t id, int *nown, uint32_t *up, int *keep);
uint32_t mt_stack_count(void); /* ids in use, the unknown ones included */
int mt_stack_kind(uint32_t id);
/* The id a file shows: 0 for the unknown ids. */
static inline uint32_t
mt_stack_public(uint32_t id) {
	return id < MT_NKINDS ? 0 : id;
}

/* Charge an allocation or free of (weighted) bytes/count to site id (its
 * kind is the id's own; the argument is kept for the callers' clarity).
 * plain: plain updates, for the solo thread in a hook mt_plain_enter
 * allowed (glue.h); else atomic adds.  Never allocates.  Async-signal-safe. */
void mt_site_alloc(uint32_t id, int kind, int64_t bytes, int64_t count, int plain);
void mt_site_free(uint32_t id, int kind, int64_t bytes, int64_t count, int plain);
/* Undo a free (a failed realloc keeps its block).  Async-signal-safe. */
void mt_site_unfree(uint32_t id, int kind, int64_t bytes, int64_t count);
/* The shared figures of a site: the whole of them while one thread
 * charges; read a site's figures with mt_site_read. */
struct mt_site *mt_site_get(uint32_t id, int kind);
/* A site's figures, the shared ones and every thread's share summed (the
 * at-peak bytes in atpeak_bytes, with the kind's epoch now); raises the
 * shared peak to what it read once threads have shares (sites.c).
 * Returns whether the site was ever charged.  For the writer. */
int mt_site_read(uint32_t id, int kind, struct mt_site *out);
/* Whether site id was ever charged (an allocation in any of its
 * figures), without summing them.  For the writer. */
int mt_site_charged(uint32_t id);
/* charge.c: this thread counts in slot `slot` of mt_tcounts (it owns it
 * unless slot is the last); its call-site figures follow (sites.c). */
void mt_sites_thread(uint32_t slot);
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
	uint64_t pad[3];
} __attribute__((aligned(64)));
#define MT_TSLOTS 256
extern struct mt_tcount mt_tcounts[MT_TSLOTS];
/* The heap's counts, the slots summed into *t (allocs, alloc_bytes,
 * frees, live_count, free_bytes; live and peak bytes are shared). */
void mt_heap_counts(struct mt_totals *t);
/* Exact process totals: an allocation of bytes; a release of bytes (whole:
 * the allocation is gone, counted as a free).  Async-signal-safe. */
void mt_totals_alloc(int kind, uint64_t bytes);
void mt_totals_free(int kind, uint64_t bytes, int whole);
extern uint64_t mt_sites_dropped; /* allocations charged to id 0: table full */

/* fork: the child starts with empty call-site figures; stacks are kept. */
void mt_sites_prefork(void);
void mt_sites_postfork_parent(void);
void mt_sites_postfork_child(int fresh);
/* Bytes of memory the tables hold (for the snapshot's shim record): the
 * stacks (headers, frames, index) and the call-site figures; the sum. */
uint64_t mt_sites_memory(uint64_t *stack_bytes, uint64_t *site_bytes);

#endif
