/*
 * sites.h — call sites: each stack id (stacks.h) keeps live bytes and
 * count, allocations, allocated bytes, frees and peak live bytes, charged
 * by every tracked allocation and free; the process totals are totals.h.
 *
 *   array            index     element          charged by
 *   sites (shared)   stack id  struct mt_site   the first thread, threads
 *                                               without a slot: atomic adds
 *   tsites[slot]     stack id  struct mt_site   the slot's own thread:
 *                                               plain stores (one writer)
 *
 * A site's figures are the sum over the arrays (mt_site_read).
 *
 * THE STATE LAYER (state/): one table a file, each calling only the
 * platform and the tables above it in this list; written by the capture
 * and entry layers, read by the output layer and the lifecycle.
 *
 *   file       key -> what it holds                  locking
 *   solo.h     (one flag) may the one recording      membarrier handshake
 *              thread update plainly
 *   chunks.h   id -> element, arrays mapped a        lock-free reads
 *              chunk of 1024 ids at a time
 *   map64.c    u64 -> u32, for a caller's own table  the caller's lock
 *   stacks.h   (frames, key, Python stack) -> id     lock-free; a new id
 *                                                    under the stack lock
 *   totals.h   kind -> exact process totals;         atomic adds
 *              thread slot -> heap counts
 *   sites.h    stack id -> call-site figures         atomic adds, or plain
 *                                                    (solo, or own copy)
 *   ptrtab.h   live block address -> site, size      a shard lock (or solo)
 *   maptab.h   mapped range -> site                  map_lock
 *   events.h   ring of recent events for dumps       lock-free
 *   trigger.h  pending snapshot reasons, requests    futex words; a short
 *                                                    request lock
 *   marks.h    C API step marks                      lock-free
 *   devices.h  CUDA device -> figures                atomic counters
 *
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  Charging is lock-free.
 */
#ifndef MT_SITES_H
#define MT_SITES_H
#include <stdint.h>
#include "state/stacks.h"
#include "state/solo.h"
#include "state/totals.h"

/* 64 bytes: the live count is allocs - frees (every charge moves them
 * together), so it costs no atomic of its own on the hot path and no
 * 8 bytes in each of a PyTorch process's 700 k sites. */
struct mt_site {
	int64_t live_bytes;   /* bytes allocated and not yet freed */
	uint64_t allocs;      /* allocations ever */
	uint64_t alloc_bytes; /* bytes ever allocated */
	uint64_t frees;       /* frees ever */
	int64_t peak_bytes;   /* highest live_bytes seen */
	/* live_bytes when its peak last moved (its kind's total reached a
	 * new high; on a GPU, its device's live bytes: stacks.h mt_peak_slot):
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
/* A site's live bytes at its peak (see atpeak_bytes; pslot: the peak it
 * is measured against, mt_stack_peak_slot of its id). */
static inline int64_t
mt_site_at_peak(const struct mt_site *s, int pslot) {
	return s->atpeak_epoch == __atomic_load_n(&mt_peak_epoch[pslot], __ATOMIC_RELAXED)
		       ? s->atpeak_bytes
		       : s->live_bytes;
}
/* Allocations not yet freed. */
static inline int64_t
mt_site_live_count(const struct mt_site *s) {
	return (int64_t)(s->allocs - s->frees);
}

/* Which sites changed since the writer last looked: a byte per group of
 * 64 ids, set (when clear) by every charge after its figures changed, so
 * a snapshot reads the groups that changed, not every site (a PyTorch
 * process holds 200 k; a training step changes a few hundred).  The
 * writer takes the set (mt_sites_take_changed: each byte cleared, then a
 * membarrier, so a charge whose byte it cleared either set it again or
 * made its figures visible before the writer reads them: a charge orders
 * its figures before its test of the byte only in the compiler, for the
 * barrier to order in the CPU).  Without membarrier there is no set: the
 * writer reads every site. */
#define MT_SITE_GROUP_SHIFT 6
#define MT_SITE_GROUPS ((MT_MAX_CHUNKS * MT_CHUNK_IDS) >> MT_SITE_GROUP_SHIFT)
extern MT_HIDDEN uint8_t mt_site_changed[MT_SITE_GROUPS];
static inline void
mt_site_touch(uint32_t id) {
	uint8_t *d = &mt_site_changed[id >> MT_SITE_GROUP_SHIFT];
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* after the figures */
	if (!__atomic_load_n(d, __ATOMIC_RELAXED))
		__atomic_store_n(d, 1, __ATOMIC_RELAXED);
}
/* The writer: the groups changed since its last call, as bits of set
 * (MT_SITE_GROUPS of them, cleared here first), each group's byte
 * cleared; 0 when there is no such set (no membarrier): read every site. */
int mt_sites_take_changed(uint64_t *set);

/* The figures' arrays, and the stack table with them (stacks.h): 0 or
 * ENOMEM. */
int mt_sites_init(uint64_t max_stacks, int depth);

/* Charge an allocation or free of (weighted) bytes/count to site id;
 * pslot: the peak its at-peak bytes follow (mt_peak_slot of its key: the
 * caller knows it without looking the id up).
 * plain: plain updates, for the solo thread in a hook mt_plain_enter
 * allowed (solo.h); else atomic adds.  Never allocates.  Async-signal-safe. */
void mt_site_alloc(uint32_t id, int pslot, int64_t bytes, int64_t count, int plain);
void mt_site_free(uint32_t id, int pslot, int64_t bytes, int64_t count, int plain);
/* Undo a free (a failed realloc keeps its block).  Async-signal-safe. */
void mt_site_unfree(uint32_t id, int pslot, int64_t bytes, int64_t count);
/* The shared figures of a site: the whole of them while one thread
 * charges; read a site's figures with mt_site_read. */
struct mt_site *mt_site_get(uint32_t id, int pslot);
/* A site's figures, the shared ones and every thread's share summed (the
 * at-peak bytes in atpeak_bytes, with pslot's epoch now); raises the
 * shared peak to what it read once threads have shares (sites.c).
 * Returns whether the site was ever charged.  For the writer. */
int mt_site_read(uint32_t id, int pslot, struct mt_site *out);
/* Whether site id was ever charged (an allocation in any of its
 * figures), without summing them.  For the writer. */
int mt_site_charged(uint32_t id);
/* charge.c: this thread counts in slot `slot` of mt_tcounts (it owns it
 * unless slot is the last); its call-site figures follow (sites.c). */
void mt_sites_thread(uint32_t slot);

/* fork: the child starts with empty call-site figures; stacks are kept. */
void mt_sites_prefork(void);
void mt_sites_postfork_parent(void);
void mt_sites_postfork_child(int fresh);
/* Bytes of memory the tables hold (for the snapshot's shim record): the
 * stacks (headers, frames, index) and the call-site figures; the sum. */
uint64_t mt_sites_memory(uint64_t *stack_bytes, uint64_t *site_bytes);

#endif
