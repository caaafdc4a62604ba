/*
 * cfi.c — the shim's own stack walker (cfi.h): each frame's call frame
 * information reduced to one rule a return address (ehframe.c reads it
 * from .eh_frame, found through .eh_frame_hdr's sorted table), kept in a
 * table all threads share (cfitab.c) behind a small cache per thread, so
 * a return address seen before costs a probe of that cache instead of
 * libunwind's ~1,300 instructions a capture (its cursor set-up) and its
 * first-time lookups (dl_iterate_phdr under a signal mask: two syscalls
 * each); and a walk takes the frames it shares with the thread's last
 * walk from that walk (mt_cfi_walk).
 *
 * A frame whose rule is UNSUPPORTED (ehframe.h: a CFA given by a DWARF
 * expression, a signal frame, code no loaded object holds, such as a
 * JIT's) ends the walk with -1, and the capture is done again by libunwind
 * from the start: the walker never guesses.
 *
 * Rules: never calls malloc; takes no lock (the rule table is lock free,
 * _dl_find_object is lock free by glibc's contract); reads of the stack
 * stay inside the calling thread's stack mapping, so a wrong rule ends a
 * walk early rather than faulting.  Async-signal-safe.
 */
#include "platform/glue.h"
#include "capture/cfi.h"
#include "capture/cfitab.h"
#include "capture/ehframe.h"
#include "platform/tmem.h"
#include <dlfcn.h>
#include <string.h>

struct entry {
	uint64_t key; /* pc; 0: empty */
	uint64_t rule;
};

static int ready; /* mt_cfi_init found _dl_find_object and mapped the table */
static uint64_t handed; /* walks given up (mt_cfi_handed) */
static int (*find_object)(void *, struct dl_find_object *);

/* pc's rule, worked out from the CFI: target is the address whose row
 * applies (pc itself for the innermost frame, the call instruction's
 * last byte, pc - 1, for the others). */
static uint64_t
compute(uintptr_t target) {
	struct dl_find_object fo;
	if (!find_object || find_object((void *)target, &fo) != 0 || !fo.dlfo_eh_frame)
		return RULE(UNSUPPORTED, 0, 0, 0);
	const struct mt_span obj = {(uintptr_t)fo.dlfo_map_start, (uintptr_t)fo.dlfo_map_end};
	return mt_eh_rule(&obj, fo.dlfo_eh_frame, target);
}

/* The thread's own small cache of rules in front of the shared table,
 * direct-mapped by pc: the frames a thread walks again and again (a
 * loop's callers, its allocator's own) stay in its L1 cache, while the
 * shared table's entries are a cache miss each (46% of the walker's
 * samples under `import torch` without it).  Keyed by pc (0: empty);
 * emptied by its own thread when the generation moved (l1_gen).  1024
 * entries (16 KiB a thread): with 256, the C++ initializers `import
 * torch` runs (870 k allocations, 72 k distinct return addresses) missed
 * it often enough that its import took ~3% longer. */
#define L1_BITS 10

/* A miss in the thread's cache: the shared table, else the CFI. */
static MT_NOINLINE uint64_t
rule_miss(uintptr_t pc, int inner, uint64_t g, struct entry *c) {
	uint64_t r;
	if (!mt_cfitab_get(pc, g, &r)) {
		r = compute(inner ? pc : pc - 1);
		mt_cfitab_put(pc, g, r);
	}
	c->key = pc;
	c->rule = r;
	return r;
}

static inline uint64_t
rule_of(struct entry *cache, uintptr_t pc, int inner, uint64_t g) {
	struct entry *c = &cache[(pc ^ pc >> L1_BITS) & ((1u << L1_BITS) - 1)];
	if (MT_LIKELY(c->key == pc))
		return c->rule;
	return rule_miss(pc, inner, g, c);
}

int
mt_cfi_init(void *(*sym)(void *, const char *)) {
	if (ready)
		return 1;
	find_object = (int (*)(void *, struct dl_find_object *))sym(RTLD_DEFAULT, "_dl_find_object");
	if (!find_object)
		return 0;
	if (!mt_cfitab_init())
		find_object = NULL;
	ready = find_object != NULL;
	return ready;
}

uint64_t
mt_cfi_handed(void) {
	return __atomic_load_n(&handed, __ATOMIC_RELAXED);
}

/* The thread's last walk, frame by frame: each frame's state (pc, sp,
 * rbp) and where its step read rbp.  A walk that comes to a frame of the
 * last one (same sp, same pc, same rbp) has the rest of it for the price
 * of checking that the stack words the last walk read there (each
 * return address, each saved rbp) still hold what they held: the walk is
 * a function of its state and of those words, so it would find the same
 * frames, up to the first word that changed; from there it steps, and may
 * meet the last walk again further out.  Those checks are independent
 * loads; a step is a chain (load the return address, look up its rule,
 * add the offset, load the next), 15-20 cycles a frame.  Allocations in a loop share their outer frames
 * with the one before; in cc1 most stacks are 30 frames or more.  Two
 * buffers: a walk reads the last while it writes its own. */
#define MEMO_N 64
struct mframe {
	uintptr_t sp, pc, bp;
	uintptr_t slot; /* where this frame's step read rbp, 0: none */
};
struct memo {
	struct mframe f[MEMO_N];
	uintptr_t hi;           /* the stack's top it was walked under */
	uint64_t gen;
	int n;     /* frames recorded */
	int final; /* the walk stopped at frame n - 1 (else it went on, or ended at max) */
	/* for mt_cfi_keep: where the walk's last step read a zero return
	 * address (0: it did not end so), its stop range and max, and
	 * whether it started at a caller (from) and was recorded whole */
	uintptr_t endat, stop_lo, stop_hi;
	int max, whole;
	/* a walk that ended at max (or after its stop frame): the frame it
	 * gave last, not stepped and so not in f (its pc is the stack's
	 * last, read by the step before) */
	int at_max;
	struct mframe tail;
	/* each frame's rule takes its CFA from rbp (mt_cfi_keep: whether the
	 * rbp a step read decides anything) */
	uint8_t rbp_cfa[MEMO_N];
};

/* ---- the thread's tables ------------------------------------------------
 * cfi.h's part (the recall's) first, then the walker's: its cache of
 * rules and its last two walks.  One block of the shim's own memory a
 * thread (platform/tmem.h: 40 KiB of address space, its pages touched as
 * used), made when the thread's stack mapping is first found
 * (mt_cfi_recall_clear) and taken again by a later thread once this one
 * has ended. */
struct cfi_thread {
	struct mt_cfi_thread rc;
	uint64_t l1_gen;
	unsigned memo_cur;
	struct entry l1[1u << L1_BITS];
	struct memo memos[2];
};
MT_TLS struct mt_cfi_thread *mt_cfi_me;
static struct mt_tpool pool = MT_TPOOL(sizeof(struct cfi_thread));

/* The calling thread's tables, made if it has none; NULL: no memory. */
static inline struct cfi_thread *
mine(void) {
	struct mt_cfi_thread *t = mt_cfi_me;
	if (MT_UNLIKELY(!t))
		mt_cfi_me = t = mt_tmem_claim(&pool);
	return (struct cfi_thread *)t;
}

/* The thread's cache, emptied first when the generation moved (a dlclose
 * since: forget them all). */
static inline __attribute__((always_inline)) struct entry *
l1_fresh(struct cfi_thread *t, uint64_t full) {
	if (MT_UNLIKELY(t->l1_gen != full)) {
		memset(t->l1, 0, sizeof t->l1);
		t->l1_gen = full;
	}
	return t->l1;
}

/* Frame k of the walk being recorded (past MEMO_N: not kept). */
static inline void
remember(struct memo *rec, int k, uintptr_t sp, uintptr_t pc, uintptr_t bp, uintptr_t slot) {
	if (k < MEMO_N) {
		rec->f[k].sp = sp;
		rec->f[k].pc = pc;
		rec->f[k].bp = bp;
		rec->f[k].slot = slot;
	}
}

/* From frame j of the last walk (which this walk has reached: same sp,
 * pc, rbp), the frames after it this walk takes, at most lim: while step
 * j + i reads what it read before (frame j+i+1's return address, and rbp
 * where that step read it), frame j+i+1 is the last walk's, and its
 * return address goes to out[i].  The count, negated when the last one is
 * in the stop range.  Apart from the walk's other state, so that its few
 * values stay in registers. */
static inline int
taken(const struct memo *old, int j, int lim, uintptr_t *out, uintptr_t lo, uintptr_t stop_lo,
      uintptr_t stop_hi) {
	const struct mframe *f = old->f + j;
	for (int i = 0; i < lim; i++) {
		uintptr_t at = f[i].slot, next = f[i + 1].pc;
		if (((const uintptr_t *)f[i + 1].sp)[-1] != next ||
		    (at && (at < lo || *(const uintptr_t *)at != f[i + 1].bp)))
			return i;
		out[i] = next;
		if (mt_pc_in(next, stop_lo, stop_hi))
			return -(i + 1);
	}
	return lim;
}

/* The walk has reached frame *j of the last walk (same sp, pc, rbp):
 * while step j reads what it read before (frame j + 1's return address,
 * and rbp where step j read it), frame j + 1 is the last walk's; checked
 * only as far as the frames this walk takes.  Moves the walk's position
 * (*pc, *sp, *bp, frame *k, *n out of *max) past them; 1 when the walk
 * ends there, as the last one did.  Inlined: the position stays in
 * registers. */
static inline __attribute__((always_inline)) int
follow(const struct memo *old, int on, struct memo *rec, uintptr_t *pcs, uintptr_t lo,
       uintptr_t stop_lo, uintptr_t stop_hi, uintptr_t *pc, uintptr_t *sp, uintptr_t *bp,
       int *j, int *k, int *n, int *max) {
	int m = taken(old, *j, on - 1 - *j < *max - *n ? on - 1 - *j : *max - *n, pcs + *n, lo,
		      stop_lo, stop_hi);
	if (m < 0) { /* the last taken is the stop frame: the walk ends after it */
		m = -m;
		*max = *n + m;
	}
	if (*k < MEMO_N) { /* frames j .. j+m-1, as far as the record goes */
		size_t c = (size_t)(*k + m <= MEMO_N ? m : MEMO_N - *k);
		memcpy(rec->f + *k, old->f + *j, c * sizeof *rec->f);
		memcpy(rec->rbp_cfa + *k, old->rbp_cfa + *j, c);
	}
	*j += m;
	*k += m;
	*n += m;
	*pc = old->f[*j].pc;
	*sp = old->f[*j].sp;
	*bp = old->f[*j].bp;
	if (*j == on - 1 && old->final && *n < *max) { /* it stopped here: so does this one */
		remember(rec, *k, *sp, *pc, *bp, 0);
		if (*k < MEMO_N)
			rec->rbp_cfa[*k] = old->rbp_cfa[*j];
		rec->endat = old->endat;
		return 1;
	}
	++*j; /* this frame is stepped below; the next may meet the last walk again */
	return 0;
}

/* A frame the walker cannot step: the capture goes to libunwind, and the
 * next walk finds no last walk to take frames from.  -1. */
static inline __attribute__((always_inline)) int
hand_over(struct cfi_thread *t, struct memo *rec) {
	mt_add(&handed, 1);
	rec->n = 0;
	t->memo_cur ^= 1;
	return -1;
}

/* What a walk was asked: the record of one answers the next only for the
 * same question. */
struct memo_key {
	uintptr_t hi;
	uint64_t gen;
	uintptr_t stop_lo, stop_hi;
	int max;
};

/* The walk's record closed (k frames visited; final: it ended by itself,
 * not at max) and made the one the next walk reads. */
static inline __attribute__((always_inline)) void
memo_close(struct cfi_thread *t, struct memo *rec, int k, int final, struct memo_key q,
	   uintptr_t from) {
	rec->n = k < MEMO_N ? k : MEMO_N;
	rec->final = final && k <= MEMO_N;
	rec->hi = q.hi;
	rec->gen = q.gen;
	rec->stop_lo = q.stop_lo;
	rec->stop_hi = q.stop_hi;
	rec->max = q.max;
	rec->whole = from && k <= MEMO_N;
	rec->at_max = !final;
	t->memo_cur ^= 1;
}

MT_NOINLINE int
mt_cfi_walk(uintptr_t *pcs, int max, uintptr_t hi, uintptr_t stop_lo, uintptr_t stop_hi,
	    uintptr_t from) {
	struct cfi_thread *t;
	if (!ready || max <= 0 || !(t = mine()))
		return -1;
	uintptr_t pc, sp, bp;
	int n = 0, inner = !from;
	if (from) { /* the caller's state: after the frame's ret, rsp is 16 above */
		pc = ((const uintptr_t *)from)[1], sp = from + 16, bp = ((const uintptr_t *)from)[0];
		pcs[n++] = pc;
	} else {
		__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
				 : "=r"(pc), "=r"(sp), "=r"(bp));
	}
	/* Every read lies between this frame's sp and the stack's top: each
	 * CFA must be above the one before (the main thread's stack may have
	 * grown below where it was last looked up: its bottom is not a bound). */
	uintptr_t lo = sp;
	uint64_t full = __atomic_load_n(&mt_cfi_gen, __ATOMIC_ACQUIRE), g = full & MT_CFI_GEN_MASK;
	struct entry *cache = l1_fresh(t, full);
	const struct memo *old = &t->memos[t->memo_cur];
	struct memo *rec = &t->memos[t->memo_cur ^ 1];
	int on = old->gen == full && old->hi == hi ? old->n : 0; /* else: forgotten */
	int k = 0, j = 0, final = 1, max0 = max;
	rec->endat = 0;
	if (mt_pc_in(pc, stop_lo, stop_hi))
		max = n; /* from a caller that is the stop frame */
	for (;; k++) {
		/* k: this frame's index; its pc is out already (n == k + 1) when
		 * the walk started at a caller, not for the walker's own (n == k) */
		while (j < on && old->f[j].sp < sp)
			j++;
		if (j < on && old->f[j].sp == sp && old->f[j].pc == pc && old->f[j].bp == bp &&
		    follow(old, on, rec, pcs, lo, stop_lo, stop_hi, &pc, &sp, &bp, &j, &k, &n, &max))
			break;
		if (n >= max) { /* not recorded: where a longer walk would go on */
			final = 0, rec->tail.sp = sp, rec->tail.pc = pc, rec->tail.bp = bp;
			break;
		}
		remember(rec, k, sp, pc, bp, 0);
		uint64_t r = rule_of(cache, pc, k == 0 && inner, g);
		if (k < MEMO_N)
			rec->rbp_cfa[k] = R_KIND(r) == STEP && R_CFA_RBP(r);
		if (R_KIND(r) != STEP) {
			if (R_KIND(r) == OUTERMOST)
				break;
			return hand_over(t, rec);
		}
		uintptr_t cfa = (R_CFA_RBP(r) ? bp : sp) + (uintptr_t)R_CFA_OFF(r);
		/* inside the stack, above this frame, 8-aligned: else stop */
		if (cfa <= sp || cfa > hi || (cfa & 7))
			break;
		if (R_RBP_OFF(r)) {
			uintptr_t at = cfa + (uintptr_t)R_RBP_OFF(r);
			if (at < lo || at > hi - 8)
				break;
			if (k < MEMO_N)
				rec->f[k].slot = at;
			bp = *(const uintptr_t *)at;
		}
		pc = ((const uintptr_t *)cfa)[-1];
		sp = cfa;
		if (!pc) {
			rec->endat = cfa - 8;
			break;
		}
		pcs[n++] = pc;
		if (mt_pc_in(pc, stop_lo, stop_hi))
			max = n; /* the stop frame: the walk ends after it */
	}
	/* The walk stopped at frame k (final: recorded, it counts) or ended
	 * before stepping it (max reached: not recorded); frames 0 .. k-1, or
	 * 0 .. k, were visited.  Past MEMO_N the record ends early. */
	memo_close(t, rec, k + final, final, (struct memo_key){hi, full, stop_lo, stop_hi, max0}, from);
	return n;
}

/* ---- recall (cfi.h) ---------------------------------------------------
 * The tables: each thread's own (mt_cfi_me), direct-mapped by the start;
 * read and written only by its own thread with the re-entry guard held
 * (a signal handler's allocation meanwhile is not captured), so no
 * atomics. */
int
mt_cfi_recall_clear(void) {
	struct mt_cfi_thread *t = mt_cfi_me;
	if (!t) /* new: nothing kept */
		return (mt_cfi_me = mt_tmem_claim(&pool)) != NULL;
	for (int s = 0; s < MT_RC_SETS; s++)
		t->recalls[s][0].pc = t->recalls[s][1].pc = 0;
	return 1;
}

/* Whether set s keeps now: at once while its keeps are recalled, else
 * after a gap of offers that doubles to 64 (cfi.h mt_rset). */
static inline int
keep_now(struct mt_cfi_thread *t, unsigned s) {
	struct mt_rset *set = &t->rsets[s];
	struct mt_recall *r = t->recalls[s];
	if (r[0].used | r[1].used) {
		r[0].used = r[1].used = 0;
		set->gap = set->skip = 0;
		return 1;
	}
	if (set->skip) {
		set->skip--;
		return 0;
	}
	set->gap = set->gap ? (uint8_t)(set->gap < 32 ? 2 * set->gap : 64) : 1;
	set->skip = set->gap;
	return 1;
}

/* Which way of set s a walk starting at (pc, sp) is kept in; -1: none
 * yet (a start seen once is only noted). */
static inline int
keep_way(struct mt_cfi_thread *t, unsigned s, uintptr_t pc, uintptr_t sp) {
	struct mt_rset *set = &t->rsets[s];
	/* the way that holds this start (its words changed), else kept the
	 * second time a start misses in this set while it is one of the last
	 * two offered, in the way not used last: a start seen once (a program
	 * allocating from more places than the table holds, in no order)
	 * costs a look, not a keep (~10 instructions a frame) */
	struct mt_recall *ways = t->recalls[s];
	int w = ways[0].pc == pc && ways[0].sp == sp   ? 0
		: ways[1].pc == pc && ways[1].sp == sp ? 1
							   : -1;
	/* the start's stack changed (a helper called from two places): the
	 * other way too while it is empty, so both are kept */
	if (w >= 0 && !ways[w ^ 1].pc)
		w ^= 1;
	else if (w < 0) {
		if ((set->cand_pc[0] != pc || set->cand_sp[0] != sp) &&
		    (set->cand_pc[1] != pc || set->cand_sp[1] != sp)) {
			set->cand_pc[set->next] = pc;
			set->cand_sp[set->next] = sp;
			set->next ^= 1;
			return -1;
		}
		w = set->mru ^ 1;
	}
	set->mru = w;
	return w;
}

/* The words memo m's steps read, into r->w (even in number): how many,
 * or -1 when they do not fit. */
static inline int
keep_words(const struct memo *m, struct mt_recall *r) {
	const struct mframe *f = m->f;
	uintptr_t sp = f[0].sp;
	int nw = 0;
	/* live[k]: frame k's rbp decides where the walk goes (its rule's CFA
	 * is rbp-based, or rbp passes unchanged to a frame where it is); a
	 * step's read of rbp matters only when the next frame's is live (in
	 * code without frame pointers most are not: one word a frame) */
	uint8_t live[MEMO_N + 1];
	live[m->n] = 0; /* the frame ended at max is not stepped */
	for (int k = m->n - 1; k >= 0; k--)
		live[k] = m->rbp_cfa[k] || (!f[k].slot && live[k + 1]);
	/* each step's words: the return address it read, and rbp where it
	 * read it; the frame a walk ended at max with was given by a step
	 * too */
	if (live[0]) { /* the start's rbp, saved in the hook's frame */
		r->w[nw].at = sp - 16;
		r->w[nw++].val = f[0].bp;
	}
	for (int k = 1; k <= m->n; k++) {
		const struct mframe *to = k < m->n ? &f[k] : m->at_max ? &m->tail : NULL;
		if (!to)
			break;
		if (nw + 2 > MT_RC_W)
			return -1;
		r->w[nw].at = to->sp - 8;
		r->w[nw++].val = to->pc;
		if (f[k - 1].slot && live[k]) {
			r->w[nw].at = f[k - 1].slot;
			r->w[nw++].val = to->bp;
		}
	}
	if (m->endat) {
		if (nw + 1 > MT_RC_W)
			return -1;
		r->w[nw].at = m->endat;
		r->w[nw++].val = 0;
	}
	if (nw & 1) { /* even, for mt_cfi_recall: the last again (MT_RC_W is even) */
		r->w[nw] = r->w[nw - 1];
		nw++;
	}
	return nw;
}

void
mt_cfi_keep(uint64_t tag, uint32_t id) {
	struct cfi_thread *ct = (struct cfi_thread *)mt_cfi_me;
	if (!ct) /* no walk made */
		return;
	struct mt_cfi_thread *t = &ct->rc;
	const struct memo *m = &ct->memos[ct->memo_cur]; /* the last walk */
	if (!m->whole || m->n <= 0)
		return;
	const struct mframe *f = m->f;
	uintptr_t sp = f[0].sp;
	unsigned s = mt_recall_set(f[0].pc, sp);
	if (!keep_now(t, s))
		return;
	int w = keep_way(t, s, f[0].pc, sp);
	if (w < 0)
		return;
	struct mt_recall *r = &t->recalls[s][w];
	r->pc = 0; /* no match while it is rewritten, nor if it cannot be kept */
	int nw = keep_words(m, r);
	if (nw < 0)
		return;
	r->pc = f[0].pc;
	r->sp = sp;
	r->gen = m->gen;
	r->tag = tag;
	r->nw = nw;
	r->id = id;
}

