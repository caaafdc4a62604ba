/*
 * charge.h — the hot path between the entry points (interpose.c, cuda.c)
 * and the tables: whether to record, sampling, stack capture, charging.
 * Rules: never calls malloc; may run inside malloc, in any thread, before
 * main.  Hooks call these with the re-entry guard held.
 */
#ifndef MT_CHARGE_H
#define MT_CHARGE_H
#include "glue.h"
#include "maptab.h"
#include "ptrtab.h"

/* Per-thread state, initial-exec TLS (no __tls_get_addr, no allocation). */
struct mt_thread {
	int guard;         /* inside the shim: hooks forward straight through */
	int seeded;        /* sampling state initialised */
	int64_t countdown; /* bytes until the next sample */
	uint64_t rng;      /* xorshift64* state */
	uint32_t tslot;    /* mt_tcounts slot + 1, 0 = not chosen yet */
};
extern MT_TLS struct mt_thread mt_self;

/* 1 while hooks record (after the constructor; 0 when disabled, after the
 * final snapshot, or in a child with MEMTALLY_FOLLOW=0). */
extern int mt_active;

/* After a successful heap allocation of size bytes at p, made by a call
 * that returns to caller (the hook's return address: the stack's first
 * frame).  Never allocates. */
void mt_heap_alloc(void *p, size_t size, uintptr_t caller);
/* Before the real free of p, which the filter did not rule out
 * (mt_ptrtab_maybe, asked by the free hook): uncharge its site.  Never
 * allocates. */
void mt_heap_free(void *p);
/* A heap block was released (free counted in the exact totals). */
void mt_heap_freed(void);
/* realloc: take p's entry before the real call (*had = found) ... */
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
uint32_t mt_capture(int kind);
/* After a successful mmap/mremap of [p, p+len).  stack: charge to this
 * stack id instead of capturing one (mremap moves the charge). */
void mt_map_add(void *p, size_t len, int file, uint32_t stack);
/* munmap, or the old range of mremap. */
void mt_map_release(void *p, size_t len, struct mt_map *first);

/* fork child: the allocation count and drops start over. */
void mt_charge_postfork_child(int follow);

extern uint64_t mt_dropped_live;   /* allocations not tracked: table full */

#endif
