/*
 * solo.h — one recording thread: the protocol the tables' plain updates
 * rest on (sites.c, ptrtab.c, charge.c).
 *
 * While the thread that ran the constructor (or a fork child's only
 * thread) is the only one that has recorded, its heap hooks update the
 * call-site counters, the heap totals and the pointer table with plain
 * read-modify-writes and without shard locks: a lock-prefixed instruction
 * costs ~20 cycles on an uncontended line, and a malloc/free pair made
 * nine.  cc1, Python and `import torch` record from one thread.
 *
 * The handshake (the asymmetric fence of userspace RCU): the solo thread
 * stores mt_solo.busy = 1, then reads mt_solo.one (compiler order only;
 * no fence), works plainly if it read 1, and stores busy = 0 after.  Any
 * other thread, before its first change to that state (mt_solo_gate),
 * sets one = 2, makes every thread of the process execute a full memory
 * barrier (membarrier, private expedited), waits for busy == 0 and sets
 * one = 0: either the solo thread's read came after its barrier and saw 2
 * (it uses the atomic paths), or its busy = 1 came before the barrier
 * and is seen, and the waiter waits for that hook to end.  Threads
 * arriving meanwhile see 2 and wait for the one doing it.  Without
 * membarrier (an old kernel, a seccomp filter) one is never 1.  Signal
 * handlers: a hook's guard sends a handler's allocation straight to the
 * real allocator while a hook runs, so a plain update is never
 * interleaved with another on the same thread.
 *
 * Rules: never calls malloc; mt_solo_end may spin (yielding) while the
 * solo thread finishes a hook, and holds no lock of the shim's meanwhile.
 */
#ifndef MT_SOLO_H
#define MT_SOLO_H
#include "platform/glue.h"

struct mt_solo {
	int one;  /* 1: solo, 2: ending, 0: shared (for good) */
	int busy; /* the solo thread is in a hook that read one == 1 */
	char pad[56];
};
extern struct mt_solo mt_solo;
extern MT_TLS int mt_solo_me; /* this thread is the solo one */
/* membarrier (private expedited) is registered: mt_membarrier() makes
 * every thread of the process execute a full memory barrier. */
extern MT_HIDDEN int mt_membarrier_ok;
void mt_membarrier(void);
/* The constructor's thread (or a fork child's) becomes the solo thread,
 * if membarrier can be registered.  Never allocates. */
void mt_solo_start(void);
/* The waiting side of the handshake, for a thread that is not the solo
 * one.  Spins (yielding) while the solo thread finishes a hook. */
void mt_solo_end(void);
/* Before a thread's first change to state the solo thread changes
 * plainly: every path that does not run under mt_plain_enter. */
static inline void
mt_solo_gate(void) {
	if (MT_UNLIKELY(__atomic_load_n(&mt_solo.one, __ATOMIC_ACQUIRE)) && !mt_solo_me)
		mt_solo_end();
}
/* At the start of a hook's recording: 1 when it may use plain updates
 * (mt_addp, mt_raise_peakp, ptrtab's plain put and take); pass the
 * result to mt_plain_leave at its end. */
static inline int
mt_plain_enter(void) {
	if (!mt_solo_me) {
		mt_solo_gate();
		return 0;
	}
	__atomic_store_n(&mt_solo.busy, 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (MT_LIKELY(__atomic_load_n(&mt_solo.one, __ATOMIC_RELAXED) == 1))
		return 1;
	__atomic_store_n(&mt_solo.busy, 0, __ATOMIC_RELEASE);
	mt_solo_me = 0; /* shared for good: stop marking */
	return 0;
}
static inline void
mt_plain_leave(int plain) {
	if (plain)
		__atomic_store_n(&mt_solo.busy, 0, __ATOMIC_RELEASE);
}
/* An add that is a plain read-modify-write when plain (relaxed loads and
 * stores: the snapshot thread's racy reads see whole values). */
#define mt_add_plain(p, v)                                                     \
	({                                                                     \
		__typeof__(*(p)) _mt_v = __atomic_load_n((p), __ATOMIC_RELAXED) + (v); \
		__atomic_store_n((p), _mt_v, __ATOMIC_RELAXED);                \
		_mt_v;                                                         \
	})
#define mt_addp(plain, p, v) ((plain) ? mt_add_plain((p), (v)) : mt_add((p), (v)))
static inline int
mt_raise_peakp(int plain, int64_t *peak, int64_t live) {
	if (!plain)
		return mt_raise_peak(peak, live);
	if (live <= __atomic_load_n(peak, __ATOMIC_RELAXED))
		return 0;
	__atomic_store_n(peak, live, __ATOMIC_RELAXED);
	return 1;
}

#endif
