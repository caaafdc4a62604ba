/*
 * charge.h — the hot path between the entry points (interpose.c, cuda.c)
 * and the tables: whether to record, sampling, stack capture, charging.
 *
 * THE CAPTURE LAYER (capture/): from an allocation to the call site it is
 * charged to.  Calls the platform and state layers, and within the folder
 * only down this list:
 *   ehframe.c, cfitab.c   the CFI reader (bytes -> rule) and rule table
 *   cfi.c                 the CFI stack walker
 *   unwind.c, pylines.c   the walkers behind MEMTALLY_UNWIND; Python line
 *                         tables
 *   pyfind.c              finding the interpreter
 *   python.c              Python frames -> pystack id
 *   pyrecords.c           the python, pyframe and pystack records
 *   charge.c              this header: record or not, sample, capture,
 *                         intern, charge
 * Called by the entry points (the hooks), the output layer (records) and
 * the lifecycle.
 *
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  Hooks call these with the re-entry guard held.
 */
#ifndef MT_CHARGE_H
#define MT_CHARGE_H
#include "platform/glue.h"
#include "platform/config.h"
#include "state/maptab.h"
#include "state/ptrtab.h"
#include "state/sites.h"

/* Per-thread state, initial-exec TLS (no __tls_get_addr, no allocation). */
struct mt_thread {
	int guard;         /* inside the shim: hooks forward straight through */
	int seeded;        /* sampling state initialised */
	int64_t countdown; /* bytes until the next sample */
	uint64_t rng;      /* xorshift64* state */
	uint32_t tslot;    /* mt_tcounts slot + 1, 0 = not chosen yet */
	struct mt_tcount *tc; /* the slot this thread owns; NULL: none yet,
			       * or it shares the last one (atomic adds) */
};
extern MT_TLS struct mt_thread mt_self;

/* 1 while hooks record (after the constructor; 0 when disabled, after the
 * final snapshot, or in a child with MEMTALLY_FOLLOW=0).  Set only by
 * mt_set_active. */
extern int mt_active;
/* mt_active and host tracking on (MEMTALLY_HOST): the heap and mmap
 * hooks' one load.  Set only by mt_set_active. */
extern int mt_host_on;
/* Whether a hook records: the shim is active, host tracking on
 * (mt_host_on) and the thread is not inside the shim. */
#define MT_RECORDING()                                                         \
	(MT_LIKELY(__atomic_load_n(&mt_host_on, __ATOMIC_RELAXED)) && !mt_self.guard)
void mt_set_active(int on);
/* The sampling fast path's gate (interpose.c's malloc and free):
 * while hooks record host allocations by sampling (and the pointer table
 * has its filter), MEMTALLY_EXACT_ABOVE (every smaller allocation may be
 * one the countdown skips); else 0.  One load stands for mt_active,
 * mt_cfg.host, mt_cfg.sample, the filter and the size test.  The real
 * allocator is resolved before it is first nonzero (mt_hooks_resolve). */
extern MT_HIDDEN size_t mt_fast_below; /* hidden: read PC-relative */

/* ---- the heap hooks' common path, inline in each hook -----------------
 * Every heap call counts in its thread's slot of mt_tcounts: each of the
 * first MT_TSLOTS - 1 threads owns one and bumps it with plain (relaxed,
 * non-atomic read-modify-write) stores: one writer, racy readers; later
 * threads share the last slot with atomic adds.  Either way the sums are
 * exact.  Inline, with the rare parts out of line: a sampling run's hook
 * that records nothing is a few instructions (a call into charge.c and
 * its frame were a third of them). */
/* A thread's first count picks its slot (and sets mt_self.tc if it owns
 * one); returns the slot it counts in. */
struct mt_tcount *mt_tslot_pick(void);
static inline struct mt_tcount *
mt_tcount(void) {
	struct mt_tcount *tc = mt_self.tc;
	return MT_LIKELY(tc) ? tc : mt_tslot_pick();
}
/* A count of the slot this thread owns (mt_self.tc): its one writer. */
static inline void
mt_tc_own_add(uint64_t *c, uint64_t v) {
	/* x86-64: one add to memory, not locked: a relaxed load and store
	 * in one instruction (readers see the old or the new value whole),
	 * where the compiler made three of them */
	__asm__("addq %1, %0" : "+m"(*c) : "er"(v));
}
/* Two counts of the slot this thread owns. */
static inline void
mt_tc_own_add2(uint64_t *a, uint64_t va, uint64_t *b, uint64_t vb) {
	mt_tc_own_add(a, va);
	mt_tc_own_add(b, vb);
}
/* Add to a counter of the slot mt_tcount() returned. */
static inline void
mt_tc_add(uint64_t *c, uint64_t v) {
	if (MT_LIKELY(mt_self.tc))
		mt_tc_own_add(c, v);
	else
		mt_add(c, v);
}
/* Two counts of one slot, the slot's owner tested once. */
static inline void
mt_tc_add2(uint64_t *a, uint64_t va, uint64_t *b, uint64_t vb) {
	if (MT_LIKELY(mt_self.tc)) {
		mt_tc_own_add2(a, va, b, vb);
	} else {
		mt_add(a, va);
		mt_add(b, vb);
	}
}

/* The sampling countdown ran out (or, a new thread's, was never set:
 * TLS starts zeroed): 2 when this allocation is sampled, else 0; draws
 * the next gap (and seeds a new thread's generator). */
int mt_heap_sample_point(size_t size);
/* Whether to record an allocation of size bytes: 0 (not sampled), 1
 * (exact) or 2 (a weighted sample). */
static inline int
mt_heap_how(size_t size) {
	if (!mt_cfg.sample || size >= mt_cfg.exact_above)
		return 1;
	if (MT_LIKELY((mt_self.countdown -= (int64_t)size) > 0))
		return 0;
	return mt_heap_sample_point(size);
}
/* Record a heap allocation mt_heap_how chose (how 1 or 2). */
void mt_heap_track(void *p, size_t size, uintptr_t hook, int how);

/* After a successful heap allocation of size bytes at p, made in the
 * hook whose frame pointer is hook (its return address there is the
 * stack's first frame; 0: not known).  Never allocates. */
static inline void
mt_heap_alloc(void *p, size_t size, uintptr_t hook) {
	struct mt_tcount *tc = mt_tcount();
	mt_tc_add2(&tc->allocs, 1, &tc->alloc_bytes, size);
	int how = mt_heap_how(size);
	if (how)
		mt_heap_track(p, size, hook, how);
}
/* Free p, which the filter did not rule out (mt_ptrtab_maybe, asked by
 * the free hook): uncharge its site and call real_free.  Another thread
 * may be handed the address the moment the real free returns, so p's
 * entry comes out first; only the solo thread (solo.h), whom no other
 * thread's allocation can race, starts loading the entry's slot and runs
 * the real free while it loads (the two cache misses of an old block's
 * free overlap).  Keeps errno.  Never allocates. */
void mt_heap_free(void *p, void (*real_free)(void *));
/* A heap block was released (free counted in the exact totals). */
static inline void
mt_heap_freed(void) {
	mt_tc_add(&mt_tcount()->frees, 1);
}
/* realloc: take p's entry before the real call (*had = found); keeps
 * errno, as mt_heap_free ... */
void mt_heap_take(void *p, struct mt_ptr *e, int *had);
/* ... and put it back if the real realloc failed.  Never allocates. */
void mt_heap_restore(const struct mt_ptr *e);
/* CUDA (cuda.c): track key (tagged) for size bytes of kind on device;
 * flags MT_PTR_MAPPED: a mapping, not charged (its handle is).  stack 0:
 * capture one.  Returns the stack id, or -1 when the table is full. */
int mt_dev_track(uintptr_t key, uint64_t size, int kind, int device,
		 uint32_t stream, int flags, uint32_t stack);
/* Take key's entry into *e, uncharging unless mapped; 1 if it was there. */
int mt_dev_untrack(uintptr_t key, struct mt_ptr *e);
/* The stack id of the calling code, for memory of key (stacks.h
 * mt_stack_key: the kind, and the device for memory on a GPU). */
uint32_t mt_capture(int key);
/* After a successful mmap/mremap of [p, p+len).  stack: charge to this
 * stack id instead of capturing one (mremap moves the charge). */
void mt_map_add(void *p, size_t len, int file, uint32_t stack);
/* munmap, or the old range of mremap. */
void mt_map_release(void *p, size_t len, struct mt_map *first);
/* An anonymous PROT_NONE mapping: a reservation of address space, not
 * memory (maptab.h); its stack is kept for when it is made accessible. */
void mt_map_reserve(void *p, size_t len);
/* After mprotect: a reservation made accessible is charged as a mapping
 * from then on, an anonymous mapping made PROT_NONE is a reservation.
 * (The first tracked piece of the range says which it was.) */
void mt_map_protect(void *p, size_t len, int accessible);

/* fork child: the allocation count and drops start over. */
void mt_charge_postfork_child(int follow);

extern uint64_t mt_dropped_live;   /* allocations not tracked: table full */

#endif
