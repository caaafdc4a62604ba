/*
 * cfi.h — the shim's own stack walker: call frame information read from
 * each object's .eh_frame (found by _dl_find_object), one rule per return
 * address cached in a lock-free table, for x86-64.  What it cannot follow
 * exactly (signal frames, CFA expressions, code outside any loaded object)
 * it reports, and the caller walks that stack with libunwind instead.
 * Rules: never calls malloc; takes no lock; reads only the calling
 * thread's stack, between its own frame and the mapping's top.  Async-signal-safe.
 */
#ifndef MT_CFI_H
#define MT_CFI_H
#include "platform/glue.h"
#include "capture/cfitab.h"
#include <stdint.h>

/* sym: the real dlsym (finds _dl_find_object, glibc 2.35 and later).
 * 1 when the walker can run; 0 leaves every capture to libunwind.
 * Maps the rule table (2 MiB, its pages touched as it fills).  From the constructor. */
int mt_cfi_init(void *(*sym)(void *, const char *));
/* Return addresses of the caller's frames, innermost first, up to max
 * and up to the first in stop_lo < pc <= stop_hi (0, 0: none); -1 when a
 * frame needs what this walker does not read (the caller then unwinds
 * with libunwind).  hi: the top of the calling thread's stack mapping;
 * nothing at or above it is read.  from: 0, or the frame pointer of a
 * live standard frame further out (saved rbp, then the return address):
 * the walk starts at its return address, the frames between left out.
 * Never allocates. */
int mt_cfi_walk(uintptr_t *pcs, int max, uintptr_t hi, uintptr_t stop_lo, uintptr_t stop_hi,
		uintptr_t from);
/* ---- recall ------------------------------------------------------------
 * What a capture from a hook ends as (its stack id) is a function of the
 * walk's start (the hook's caller's pc and sp), of the stack words the
 * walk read (the start's rbp where some frame's rule reads it before a
 * step restores it, each frame's return address, rbp where a step read
 * it and the next frame's rule reads it, the
 * zero return address it may have ended at) and of what else it was
 * given: the rule table's generation, the caller's tag (the stack's key
 * and Python stack), the stack's top, the stop range and max.  The same
 * start and the same words give the same frames, exactly, so the same
 * id: a thread's loop allocating from the same few places finds its
 * stack here for the price of comparing those words (~5 instructions a
 * word) instead of walking, cutting and interning it.  A word that
 * changed (another caller at the same depth) is a miss, and the capture
 * walks.
 *
 * The last three are not compared (~25 instructions of every recall):
 * the caller keeps them fixed for a thread's kept walks.  max is the
 * configured depth, fixed at start; the stack's top changes only when the
 * thread's stack mapping is found again, and the finder then calls
 * mt_cfi_recall_clear; the stop range is none without a Python stack and
 * the eval loop's with one (the tag tells which), and finding the eval
 * loop moves the generation (mt_cfi_forget).  The checking build
 * (MT_CFI_CHECK) walks every capture and compares what the recall gave. */
#define MT_RC_SETS 8 /* of 2 ways: 8 starts hashed to 16 direct-mapped
		      * slots collide more often than not (a loop over 8
		      * sites missed a quarter of its captures in most stack
		      * layouts) */
#define MT_RC_W 64   /* words a stack may need to be kept: 1-2 a frame (17 KiB a thread in all) */
struct mt_recall {
	uintptr_t pc, sp; /* the start; pc 0: empty.  Its rbp is one of the
			   * words (saved in the hook's frame, just below sp)
			   * when the walk's course depends on it (a frame's
			   * CFA rule reads it before a step restores it), else
			   * not compared: code without frame pointers keeps
			   * loop values there */
	uint64_t gen, tag;
	int nw; /* words, even */
	uint32_t id;
	int used; /* recalled since the set's last keep (mt_rset) */
	struct mt_rword {
		uintptr_t at, val; /* a word's address, what it held */
	} w[MT_RC_W];
};
struct mt_rset {
	uintptr_t cand_pc[2], cand_sp[2]; /* the last two starts offered to the set */
	int mru;                          /* its way last hit or kept */
	int next;                         /* the cand to replace next */
	/* While no way of the set has been recalled since its last keep
	 * (mt_recall's used), it keeps again only after `skip` more offers,
	 * a gap that doubles (to 64): `import torch`'s initializers reach the
	 * same allocating helpers through ever other callers, and kept 760 k
	 * stacks (15 M frames' words) for 63 k recalls. */
	uint8_t gap, skip;
};
/* The calling thread's tables (platform/tmem.h: a block of the shim's
 * own memory, not TLS): the recall's, then the walker's (cfi.c), reached
 * through one TLS pointer.  Read and written only by the thread itself,
 * with the re-entry guard held, so no atomics.  NULL until the thread's
 * stack mapping is first found (mt_cfi_recall_clear makes them): the
 * recall runs only inside that mapping, so it reads them untested. */
struct mt_cfi_thread {
	struct mt_rset rsets[MT_RC_SETS];
	struct mt_recall recalls[MT_RC_SETS][2];
};
extern MT_TLS struct mt_cfi_thread *mt_cfi_me;

static inline unsigned
mt_recall_set(uintptr_t pc, uintptr_t sp) {
	return (unsigned)(((pc ^ sp) * 0x9e3779b97f4a7c15ull) >> 61); /* MT_RC_SETS == 8 */
}

/* way r of the start's set: 1 and *id when it holds the start and its
 * words still hold what they held */
static inline int
mt_recall_way(struct mt_recall *r, uintptr_t pc, uintptr_t sp, uint64_t tag, uint32_t *id) {
	/* one branch for the start, its tag and the generation */
	if ((r->pc ^ pc) | (r->sp ^ sp) | (r->tag ^ tag) |
	    (r->gen ^ __atomic_load_n(&mt_cfi_gen, __ATOMIC_ACQUIRE)))
		return 0;
	/* every word lies between sp and the stack's top, as when the walk
	 * read it; two a step, one branch for both (the count is even:
	 * mt_cfi_keep) */
	for (const struct mt_rword *w = r->w, *end = r->w + r->nw; w < end; w += 2)
		if ((*(const uintptr_t *)w[0].at ^ w[0].val) | (*(const uintptr_t *)w[1].at ^ w[1].val))
			return 0;
	*id = r->id;
	r->used = 1;
	return 1;
}

/* The id a capture from `from` (as mt_cfi_walk's) found last time, kept
 * by mt_cfi_keep, when this walk would read the same stack words from the
 * same start under the same rule generation and tag (and the fixed
 * inputs above): 1 and *id, else 0.  The caller checked that from lies in
 * its stack mapping.  Inline: a call and its frame were ~30 instructions
 * of each recalled capture.  Never allocates. */
static inline int
mt_cfi_recall(uintptr_t from, uint64_t tag, uint32_t *id) {
	uintptr_t pc = ((const uintptr_t *)from)[1], sp = from + 16;
	unsigned s = mt_recall_set(pc, sp);
	struct mt_cfi_thread *t = mt_cfi_me;
	struct mt_rset *set = &t->rsets[s];
	int w = set->mru;
	if (mt_recall_way(&t->recalls[s][w], pc, sp, tag, id))
		return 1;
	if (!mt_recall_way(&t->recalls[s][w ^ 1], pc, sp, tag, id))
		return 0;
	set->mru = w ^ 1;
	return 1;
}
/* The calling thread's stack mapping was found (again: its top may have
 * moved): what it kept goes; its tables (mt_cfi_me) are made first if it
 * has none.  0 when they cannot be (no memory): the caller then takes
 * the stack as not known, so that no recall runs without them.
 * Async-signal-safe. */
int mt_cfi_recall_clear(void);
/* Keep id (with tag) as what the calling thread's last walk, one from a
 * caller recorded whole, ends as.  Only right after that walk. */
void mt_cfi_keep(uint64_t tag, uint32_t id);
/* After dlclose: every cached rule is forgotten (an object loaded at the
 * same address must not be walked by the unloaded one's rules). */
void mt_cfi_forget(void);
/* Walks that met a frame the walker does not read (a signal frame, code
 * outside any loaded object, a rule outside its forms) and returned -1. */
uint64_t mt_cfi_handed(void);
/* Bytes of the rule table in use (its pages that hold a rule). */
uint64_t mt_cfi_memory(void);

#endif
