/*
 * sites.c — the stack table and the per-(stack, kind) call-site figures.
 *
 * Stacks live in append-only frame arenas (1 MiB each, mapped as needed)
 * and a chunked array of stack headers (chunks.h).  A stack shares its
 * outer frames with an earlier one (heaptrack's trace tree, flattened):
 * it stores only its own innermost frames and names the stack ("up")
 * whose outermost frames are the rest.  Under an interpreter or a
 * dynamic loader running constructors most stacks differ from the one
 * before only in their last few frames (PyTorch's import: 21 frames a
 * stack, 3.6 new), so this keeps a sixth of the frames.  The up chain is
 * kept short: a stack's up holds fewer shared frames than the stack
 * itself (an up that would share no more is skipped for its own up), so
 * rebuilding a stack's frames takes at most one step per frame.
 *
 * A power-of-two index of ids is probed without a lock; a new stack
 * is added under stack_lock, and when the index grows the new one is
 * published with a release store and the old one is kept (at most the sum
 * of a geometric series, i.e. the final size again), so a reader still
 * probing it never touches freed memory; a reader that misses there takes
 * the lock and looks again in the current index.
 *
 * A stack id names (frames, kind), so each id is one call site with one
 * set of atomic counters in a chunked array, read racily by the snapshot
 * writer; an id's chunk is mapped before the id is published.  (Keying
 * by frames alone cost every stack a slot per kind: 1 KiB a stack.)  The pointer table (ptrtab.c) remembers
 * which site each live allocation belongs to.
 */
#include "platform/glue.h"
#include "state/sites.h"
#include "state/chunks.h"
#include <string.h>
#include <sys/mman.h>

const char *const mt_kind_names[MT_NKINDS] = MT_KIND_NAMES;

struct stack {
	uint64_t hash;      /* of all the frames, the kind and py */
	uint32_t own;       /* its innermost nown frames: FRAMES_AT(own) */
	uint32_t up;        /* holds the outer n - nown frames; 0 = none */
	uint32_t py;        /* Python stack id (python.h), 0 = none */
	uint8_t n;          /* frames in all (depth <= 128) */
	uint8_t nown;       /* frames of its own */
	uint16_t kind;      /* enum mt_kind */
};
/* The last stack each thread was given: the likeliest to share frames
 * with its next new one. */
static MT_TLS uint32_t last_stack;
/* Each thread's stacks by hash, direct-mapped: a call site that allocates
 * again finds its id without touching the shared index, the stack's
 * header or its frames.  An entry matches on the whole 64-bit hash of
 * (frames, depth, kind, Python stack) alone: checking the header and the
 * own frames as well was three dependent loads an allocation (~11% of a
 * depth-1 run, each an L1 miss behind the pointer table's), and the index
 * trusts the same hash for a stack's shared outer frames (same()).  Two
 * stacks meeting in one entry with one hash: 2^-63 a lookup.  8 KiB a
 * thread; ids are never reused (a fork child keeps its parent's stacks),
 * so an entry never goes stale. */
#define TCACHE 512
struct tentry {
	uint64_t hash; /* 0: empty (a stack's hash is odd) */
	uint64_t id;
};
static MT_TLS struct tentry tcache[TCACHE];

struct index {
	uint64_t mask;    /* slots - 1 */
	uint32_t slot[];  /* SLOT(id, hash); 0 = empty */
};

static struct mt_chunked stacks = {.elem = sizeof(struct stack)};
static struct mt_chunked sites = {.elem = sizeof(struct mt_site)};
/* Frames are named by 32 bits (arena, index in it), not a pointer: 24
 * bytes a stack header instead of 32.  An arena's directory entry is
 * set before any stack in it is published. */
#define ARENA_SHIFT 17
#define ARENA_FRAMES (1u << ARENA_SHIFT) /* 1 MiB of frames per arena */
#define MAX_ARENAS (1u << (32 - ARENA_SHIFT))
static uintptr_t *arena_dir[MAX_ARENAS];
static uint32_t narenas;
static uint64_t arena_used;    /* frames used in the newest arena */
#define FRAMES_AT(x) (arena_dir[(x) >> ARENA_SHIFT] + ((x) & (ARENA_FRAMES - 1)))
static uint64_t frames_total, frames_cap, arena_bytes;
static struct index *cur_index;
static uint64_t max_stacks;
static uint32_t nstacks;       /* ids handed out, including 0 */
static uint32_t last_made;     /* the newest stack (under stack_lock) */
static mt_lock_t stack_lock;
static uint64_t index_bytes;
struct mt_totals mt_totals[MT_NKINDS];
struct mt_tcount mt_tcounts[MT_TSLOTS];

void
mt_heap_counts(struct mt_totals *t) {
	uint64_t a = 0, b = 0, f = 0, lc = 0, fb = 0;
	for (int i = 0; i < MT_TSLOTS; i++) {
		a += __atomic_load_n(&mt_tcounts[i].allocs, __ATOMIC_RELAXED);
		b += __atomic_load_n(&mt_tcounts[i].alloc_bytes, __ATOMIC_RELAXED);
		f += __atomic_load_n(&mt_tcounts[i].frees, __ATOMIC_RELAXED);
		lc += __atomic_load_n(&mt_tcounts[i].live_count, __ATOMIC_RELAXED);
		fb += __atomic_load_n(&mt_tcounts[i].free_bytes, __ATOMIC_RELAXED);
	}
	t->allocs = a;
	t->alloc_bytes = b;
	t->frees = f;
	t->live_count = (int64_t)lc;
	t->free_bytes = fb;
}
uint64_t mt_sites_dropped;

static void *
reserve(size_t bytes) {
	long r = mt_sys(SYS_mmap, 0, bytes, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return (r < 0 && r > -4096) ? NULL : (void *)r;
}

static struct index *
index_new(uint64_t slots) {
	size_t bytes = sizeof(struct index) + slots * sizeof(uint32_t);
	struct index *ix = reserve(bytes);
	if (ix) {
		ix->mask = slots - 1;
		index_bytes += bytes;
	}
	return ix;
}

int
mt_sites_init(uint64_t max, int depth) {
	max_stacks = max < (uint64_t)MT_MAX_CHUNKS * MT_CHUNK_IDS
			     ? max
			     : (uint64_t)MT_MAX_CHUNKS * MT_CHUNK_IDS;
	frames_cap = max_stacks * (uint64_t)depth;
	cur_index = index_new(1024);
	if (!cur_index || mt_chunk_ensure(&stacks, 0) || mt_chunk_ensure(&sites, 0))
		return ENOMEM;
	nstacks = MT_NKINDS; /* ids 0 .. MT_NKINDS-1: the unknown stack of each kind */
	return 0;
}

static inline struct stack *
stack_at(uint32_t id) {
	return mt_chunk_at(&stacks, id);
}

/* Room for n frames (under stack_lock): 0 and *at, or ENOMEM. */
static int
frames_alloc(int n, uint32_t *at) {
	if (!narenas || arena_used + (uint64_t)n > ARENA_FRAMES) {
		if (narenas == MAX_ARENAS)
			return ENOMEM;
		uintptr_t *a = mt_sys_mmap(ARENA_FRAMES * sizeof *a);
		if (!a)
			return ENOMEM;
		arena_dir[narenas++] = a;
		arena_used = 0;
		arena_bytes += ARENA_FRAMES * sizeof *a;
	}
	*at = (narenas - 1) << ARENA_SHIFT | (uint32_t)arena_used;
	arena_used += (uint64_t)n;
	frames_total += (uint64_t)n;
	return 0;
}

/* Four lanes, a frame each in turn, then one mix of the four: a chain of
 * multiplies a frame long was ~25 ns at 15 frames (each waits for the
 * last); the lanes run side by side.  Lanes are positions mod 4, so two
 * stacks with the same frames in another order hash apart. */
static uint64_t
hash_frames(const uintptr_t *pcs, int n, int kind, uint32_t py) {
	uint64_t a = 0x9e3779b97f4a7c15ull ^ (uint64_t)n, b = 0xc2b2ae3d27d4eb4full ^ ((uint64_t)kind << 56),
		 c = 0x165667b19e3779f9ull ^ ((uint64_t)py << 24), d = 0x27d4eb2f165667c5ull;
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		a = mt_mix64(a ^ pcs[i]);
		b = mt_mix64(b ^ pcs[i + 1]);
		c = mt_mix64(c ^ pcs[i + 2]);
		d = mt_mix64(d ^ pcs[i + 3]);
	}
	for (; i < n; i++)
		a = mt_mix64(a ^ pcs[i]);
	return mt_mix64(a ^ (b << 16 | b >> 48) ^ (c << 32 | c >> 32) ^ (d << 48 | d >> 16)) | 1;
}

/* The frames of s into out (room for s->n), innermost first: each step
 * takes the frames s holds of its own beyond those its up supplies, then
 * moves to the up.  Never allocates; reads only published stacks. */
static void
walk(const struct stack *s, uintptr_t *out) {
	int pos = 0, want = s->n;
	while (want > 0) {
		int keep = s->n - s->nown;
		if (want > keep) {
			int take = want - keep;
			memcpy(out + pos, FRAMES_AT(s->own) + (s->nown - take),
			       (size_t)take * sizeof *out);
			pos += take;
			want = keep;
		}
		if (want)
			s = stack_at(s->up);
	}
}

/* Whether s is (pcs[0..n), kind, py) with hash h: the hash, depth, kind
 * and Python stack, then its own frames; the rest (which it shares with
 * an earlier stack) by the 64-bit hash of all of them.  Walking the up
 * chain on every hit cost an exact malloc benchmark ~15% (a header per
 * step, cold); two stacks that differ only outside their own frames and
 * share the hash are 2^-64 a lookup. */
static inline int
same(const struct stack *s, uint64_t h, const uintptr_t *pcs, int n, int kind, uint32_t py) {
	if (s->hash != h || s->n != (uint32_t)n || s->kind != (uint32_t)kind || s->py != py)
		return 0;
	/* a loop, not memcmp: a few frames, where the call cost more than
	 * the compare (memcmp was 4% of a depth-1 run) */
	const uintptr_t *f = FRAMES_AT(s->own);
	for (int i = 0; i < s->nown; i++)
		if (f[i] != pcs[i])
			return 0;
	return 1;
}

/* An index slot holds the id (below 2^22: MT_MAX_CHUNKS * MT_CHUNK_IDS)
 * and 10 bits of the stack's hash, so a probe passes a slot of another
 * stack without loading its header (a cache miss each: `probe` was the
 * shim's top symbol under PyTorch's import). */
#define ID_BITS 22
_Static_assert((uint64_t)MT_MAX_CHUNKS * MT_CHUNK_IDS <= 1u << ID_BITS, "ids fit a slot");
#define SLOT(id, h) ((uint32_t)(id) | (uint32_t)((h) >> 54) << ID_BITS)

static uint32_t
probe(const struct index *ix, uint64_t h, const uintptr_t *pcs, int n, int kind,
      uint32_t py, uint64_t *slot_out) {
	uint32_t tag = (uint32_t)(h >> 54);
	for (uint64_t i = h & ix->mask;; i = (i + 1) & ix->mask) {
		uint32_t v = mt_load(&ix->slot[i]);
		if (!v) {
			if (slot_out)
				*slot_out = i;
			return 0;
		}
		if (v >> ID_BITS != tag)
			continue;
		uint32_t id = v & ((1u << ID_BITS) - 1);
		if (same(stack_at(id), h, pcs, n, kind, py))
			return id;
	}
}

static int
grow_index(void) {
	struct index *old = cur_index;
	uint64_t slots = (old->mask + 1) * 2;
	struct index *ix = index_new(slots);
	if (!ix)
		return ENOMEM;
	for (uint32_t id = MT_NKINDS; id < nstacks; id++) {
		uint64_t i = stack_at(id)->hash & ix->mask;
		while (ix->slot[i])
			i = (i + 1) & ix->mask;
		ix->slot[i] = SLOT(id, stack_at(id)->hash);
	}
	mt_store(&cur_index, ix); /* old stays mapped: readers may be in it */
	return 0;
}

static uint32_t intern_new(const uintptr_t *pcs, int n, int kind, uint32_t py,
			   uint64_t h, struct tentry *tc);

uint32_t
mt_stack_intern(const uintptr_t *pcs, int n, int kind, uint32_t py) {
	if (n <= 0 && !py)
		return (uint32_t)kind;
	if (n < 0)
		n = 0;
	uint64_t h = hash_frames(pcs, n, kind, py);
	struct tentry *tc = &tcache[(h >> 20) & (TCACHE - 1)];
	if (tc->hash == h)
		return last_stack = (uint32_t)tc->id;
	uint32_t id = probe(mt_load(&cur_index), h, pcs, n, kind, py, NULL);
	if (MT_LIKELY(id)) {
		tc->hash = h;
		last_stack = (uint32_t)(tc->id = id);
		return id;
	}
	return intern_new(pcs, n, kind, py, h, tc);
}

/* One frame (MEMTALLY_DEPTH=1, or a stack that is one frame): each
 * thread's ids by the frame itself, direct-mapped, checked in full (no
 * hash to compute, a leaf call: ~15 instructions where the general path
 * took ~80).  Ids are never reused: an entry never goes stale. */
#define PC1 128
static MT_TLS struct pc1 {
	uintptr_t pc; /* 0: empty (no return address is 0) */
	uint32_t py, kind, id;
} pc1[PC1];

static MT_NOINLINE uint32_t
pc1_miss(uintptr_t pc, int kind, uint32_t py, struct pc1 *c) {
	uint32_t id = mt_stack_intern(&pc, 1, kind, py);
	if (id >= MT_NKINDS)
		*c = (struct pc1){pc, py, (uint32_t)kind, id};
	return id;
}

uint32_t
mt_stack_intern1(uintptr_t pc, int kind, uint32_t py) {
	struct pc1 *c = &pc1[(pc ^ pc >> 9) & (PC1 - 1)];
	if (MT_LIKELY(c->pc == pc && c->py == py && c->kind == (uint32_t)kind))
		return c->id;
	return pc1_miss(pc, kind, py, c); /* out of line: the hit saves no registers */
}

/* mt_stack_intern's miss in the shared index: look again under the lock,
 * then add the stack.  Out of line: its frame (a stack's worth of frames
 * to compare with the last) would cost every hit its set-up. */
static __attribute__((noinline)) uint32_t
intern_new(const uintptr_t *pcs, int n, int kind, uint32_t py, uint64_t h,
	   struct tentry *tc) {
	uint32_t id;
	mt_lock(&stack_lock);
	uint64_t slot;
	struct index *ix = cur_index;
	id = probe(ix, h, pcs, n, kind, py, &slot);
	if (id)
		goto out;
	id = (uint32_t)kind; /* unless a new id is made below */
	if (nstacks >= max_stacks || frames_total + (uint64_t)n > frames_cap ||
	    mt_chunk_ensure(&stacks, nstacks) || mt_chunk_ensure(&sites, nstacks)) {
		mt_add(&mt_sites_dropped, 1); /* full: the caller charges id 0 */
		goto out;
	}
	/* grown at three quarters full: the slots' hash bits let a probe
	 * pass the longer runs without touching a stack (4 bytes a slot,
	 * where half load cost a PyTorch process 8 MiB more) */
	if ((uint64_t)nstacks * 4 > (ix->mask + 1) * 3) {
		if (grow_index())
			goto out;
		ix = cur_index;
		probe(ix, h, pcs, n, kind, py, &slot);
	}
	/* The outer frames it shares with the thread's last stack (or the
	 * last made, for a thread's first) are that stack's to hold. */
	uint32_t up = last_stack >= MT_NKINDS && last_stack < nstacks ? last_stack : last_made;
	int keep = 0;
	if (up >= MT_NKINDS) {
		uintptr_t cf[MT_MAX_DEPTH];
		int cn = stack_at(up)->n;
		walk(stack_at(up), cf);
		while (keep < n && keep < cn && cf[cn - 1 - keep] == pcs[n - 1 - keep])
			keep++;
		/* an up sharing as many of its own outer frames with its up
		 * passes them on: the chain gets one frame shorter a step */
		while (keep && keep <= stack_at(up)->n - stack_at(up)->nown)
			up = stack_at(up)->up;
	}
	if (!keep)
		up = 0;
	uint32_t own;
	if (frames_alloc(n - keep, &own)) {
		mt_add(&mt_sites_dropped, 1);
		goto out;
	}
	id = nstacks;
	struct stack *s = stack_at(id);
	s->hash = h;
	s->n = (uint8_t)n;
	s->nown = (uint8_t)(n - keep);
	s->up = up;
	s->kind = (uint16_t)kind;
	s->py = py;
	s->own = own;
	memcpy(FRAMES_AT(own), pcs, (size_t)(n - keep) * sizeof *pcs);
	last_made = id;
	mt_store(&nstacks, id + 1);
	mt_store(&ix->slot[slot], SLOT(id, h)); /* publish after the frames */
out:
	mt_unlock(&stack_lock);
	if (id >= MT_NKINDS) {
		tc->hash = h;
		last_stack = (uint32_t)(tc->id = id);
	}
	return id;
}

int
mt_stack_kind(uint32_t id) {
	return id < MT_NKINDS ? (int)id : (int)stack_at(id)->kind;
}

uint32_t
mt_stack_py(uint32_t id) {
	return id < MT_NKINDS || id >= mt_load(&nstacks) ? 0 : stack_at(id)->py;
}

const uintptr_t *
mt_stack_own(uint32_t id, int *nown, uint32_t *up, int *keep) {
	if (id < MT_NKINDS || id >= mt_load(&nstacks)) {
		*nown = *keep = 0;
		*up = 0;
		return NULL;
	}
	const struct stack *s = stack_at(id);
	*nown = s->nown;
	*up = s->up;
	*keep = s->n - s->nown;
	return FRAMES_AT(s->own);
}

uint32_t
mt_stack_count(void) {
	return mt_load(&nstacks);
}

struct mt_site *
mt_site_get(uint32_t id, int kind) {
	(void)kind; /* the id's own */
	return (struct mt_site *)mt_chunk_at(&sites, id);
}

uint32_t mt_peak_epoch[MT_NKINDS];

/* Before a site's figures change: if its kind's peak moved since they
 * last changed, what they hold now is what they held at the peak.  (Two
 * threads changing one site across a peak's move may save a figure one
 * change apart.) */
static inline void
keep_at_peak(struct mt_site *s, int kind) {
	uint32_t e = __atomic_load_n(&mt_peak_epoch[kind], __ATOMIC_RELAXED);
	if (__builtin_expect(s->atpeak_epoch != e, 0)) {
		s->atpeak_bytes = __atomic_load_n(&s->live_bytes, __ATOMIC_RELAXED);
		s->atpeak_epoch = e;
	}
}

/* ---- each thread's share ------------------------------------------------
 * With two threads charging the same call sites, every allocation and
 * free wrote a line the other thread had just written (the 2-thread
 * exact malloc benchmark: 160 ns of a pair's ~580 ns of overhead went to
 * the call sites' lines).  So each thread that owns a count slot
 * (charge.c: the first MT_TSLOTS - 1 threads) but the first charges its
 * own copy of the figures, one struct mt_site a site in a chunked array
 * of its own, with plain stores (one writer); the first thread (a
 * Python or PyTorch main thread: nearly every site), threads beyond the
 * slots and calls from a thread with no slot yet charge the shared
 * array, as before.  A site's figures are the sum over the arrays
 * (mt_site_read, for the writer; jemalloc's per-thread tctx, summed at a
 * dump).  A free is charged by the thread that frees, so one thread's
 * live bytes may be negative; the sums are exact.
 *
 * What a split costs: a site's peak_bytes.  Once a second array is
 * charged (sites_split), no thread sees a site's whole live bytes, so
 * small allocations raise no peak; an allocation of MT_SITE_BIG or more
 * is charged to the shared figures and raises the peak to the sum of
 * every share (charge_big: a spike's size is exact whichever thread made
 * it), and the writer raises it to the summed live bytes and at-peak
 * bytes it reads (doc/FORMAT.md).  at_peak_bytes
 * keeps its meaning: each array saves its own share at its first change
 * after the peak moved, and the shares add up. */
static struct mt_chunked *tsites[MT_TSLOTS]; /* [slot]; NULL: none yet */
static uint32_t tsites_hi;                   /* slots below it may have one */
static uint64_t tsites_bytes;                /* their directories */
static int sites_split;                      /* a second array was charged */
static MT_TLS uint32_t my_slot;              /* its count slot + 1 if it may
					      * have an array; else 0 */
static MT_TLS struct mt_chunked *my_sites;   /* this thread's array */

void
mt_sites_thread(uint32_t slot) {
	my_slot = slot == 0 || slot >= MT_TSLOTS - 1 ? 0 : slot + 1;
}

/* The thread's own array (made on its first charge, from raw mmap), or
 * NULL: it charges the shared one. */
static __attribute__((noinline)) struct mt_chunked *
mine_make(void) {
	uint32_t slot = my_slot - 1;
	struct mt_chunked *c = mt_sys_mmap(sizeof *c);
	if (!c) {
		my_slot = 0; /* the shared array from now on */
		return NULL;
	}
	c->elem = sizeof(struct mt_site);
	mt_add(&tsites_bytes, sizeof *c);
	__atomic_store_n(&tsites[slot], c, __ATOMIC_RELEASE);
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_RELAXED);
	while (hi < slot + 1 &&
	       !__atomic_compare_exchange_n(&tsites_hi, &hi, slot + 1, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
	__atomic_store_n(&sites_split, 1, __ATOMIC_RELEASE);
	return my_sites = c;
}

/* This thread's figures of site id, making its array or the id's chunk
 * first if need be; NULL: charge the shared ones. */
static __attribute__((noinline)) struct mt_site *
mine_get(uint32_t id) {
	struct mt_chunked *c = my_sites;
	if (!c && (!my_slot || !(c = mine_make())))
		return NULL;
	struct mt_site *s = mt_chunk_at(c, id);
	if (!s && !mt_chunk_ensure(c, id))
		s = mt_chunk_at(c, id);
	return s;
}

/* The hot path looks for the thread's own figures inline and leaves the
 * rest to the noinline paths by a tail call, so it stays a leaf without
 * a frame (import torch: a call in it doubled its instructions). */
static inline struct mt_site *
mine_now(uint32_t id) {
	struct mt_chunked *c = my_sites;
	return c ? mt_chunk_at(c, id) : NULL;
}

/* The site's peak was raised from `was` to `live` by an allocation of
 * `bytes`: stamp when (and at which step) if the raise is worth it. */
static inline void
peak_stamp(struct mt_site *s, int64_t was, int64_t live, int64_t bytes) {
	if (MT_LIKELY(live - was < (live >> 4) && bytes < MT_SITE_BIG))
		return;
	__atomic_store_n(&s->peak_ms, (uint32_t)mt_ms_since_start() + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->peak_step, __atomic_load_n(&mt_step_now, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
}

/* A charge to a site's figures: an allocation (alloc 1: live bytes up,
 * allocs and allocated bytes) or a free (live bytes down, frees). */
static inline __attribute__((always_inline)) void
own_charge(struct mt_site *s, int kind, int64_t bytes, int64_t count, int alloc) {
	keep_at_peak(s, kind); /* the thread's own: one writer */
	mt_add_plain(&s->live_bytes, alloc ? bytes : -bytes);
	if (alloc) {
		mt_add_plain(&s->allocs, (uint64_t)count);
		mt_add_plain(&s->alloc_bytes, (uint64_t)bytes);
	} else {
		mt_add_plain(&s->frees, (uint64_t)count);
	}
}

static inline __attribute__((always_inline)) void
shared_charge(uint32_t id, int kind, int64_t bytes, int64_t count, int plain, int alloc) {
	struct mt_site *s = mt_site_get(id, kind);
	keep_at_peak(s, kind);
	int64_t live = mt_addp(plain, &s->live_bytes, alloc ? bytes : -bytes);
	if (alloc) {
		int64_t was = __atomic_load_n(&s->peak_bytes, __ATOMIC_RELAXED);
		if (!__atomic_load_n(&sites_split, __ATOMIC_RELAXED) &&
		    mt_raise_peakp(plain, &s->peak_bytes, live))
			peak_stamp(s, was, live, bytes);
		mt_addp(plain, &s->allocs, (uint64_t)count);
		mt_addp(plain, &s->alloc_bytes, (uint64_t)bytes);
	} else {
		mt_addp(plain, &s->frees, (uint64_t)count);
	}
}

static __attribute__((noinline)) void
charge_slow(uint32_t id, int kind, int64_t bytes, int64_t count, int plain, int alloc) {
	struct mt_site *s = mine_get(id);
	if (s)
		own_charge(s, kind, bytes, count, alloc);
	else
		shared_charge(id, kind, bytes, count, plain, alloc);
}

/* A site's live bytes now: the shared figures and every share summed
 * (racy reads of other threads' plain stores, each whole). */
static int64_t
summed_live(uint32_t id, const struct mt_site *g) {
	int64_t live = __atomic_load_n(&g->live_bytes, __ATOMIC_RELAXED);
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_ACQUIRE);
	for (uint32_t t = 1; t < hi; t++) {
		struct mt_chunked *c = __atomic_load_n(&tsites[t], __ATOMIC_ACQUIRE);
		const struct mt_site *d = c ? mt_chunk_at(c, id) : NULL;
		if (d)
			live += __atomic_load_n(&d->live_bytes, __ATOMIC_RELAXED);
	}
	return live;
}

/* A large allocation once threads charge shares of their own: charged to
 * the shared figures, atomically, and the site's peak raised to the sum
 * of every share, so a transient buffer (a spike) leaves its exact size
 * in peak_bytes whichever thread allocates it.  Rare (MT_SITE_BIG and
 * up), so it may walk the shares. */
static __attribute__((noinline)) void
charge_big(uint32_t id, int kind, int64_t bytes, int64_t count) {
	struct mt_site *g = mt_site_get(id, kind);
	keep_at_peak(g, kind);
	mt_add(&g->live_bytes, bytes);
	mt_add(&g->allocs, (uint64_t)count);
	mt_add(&g->alloc_bytes, (uint64_t)bytes);
	int64_t was = __atomic_load_n(&g->peak_bytes, __ATOMIC_RELAXED);
	int64_t live = summed_live(id, g);
	if (mt_raise_peak(&g->peak_bytes, live))
		peak_stamp(g, was, live, bytes);
}

static inline __attribute__((always_inline)) void
charge(uint32_t id, int kind, int64_t bytes, int64_t count, int plain, int alloc) {
	struct mt_site *s = mine_now(id);
	if (MT_UNLIKELY(alloc && bytes >= MT_SITE_BIG) &&
	    __atomic_load_n(&sites_split, __ATOMIC_RELAXED)) {
		charge_big(id, kind, bytes, count);
		return;
	}
	if (MT_LIKELY(s))
		own_charge(s, kind, bytes, count, alloc);
	else if (MT_UNLIKELY(my_slot))
		charge_slow(id, kind, bytes, count, plain, alloc);
	else
		shared_charge(id, kind, bytes, count, plain, alloc);
}

void
mt_site_alloc(uint32_t id, int kind, int64_t bytes, int64_t count, int plain) {
	charge(id, kind, bytes, count, plain, 1);
}

void
mt_site_free(uint32_t id, int kind, int64_t bytes, int64_t count, int plain) {
	charge(id, kind, bytes, count, plain, 0);
}

void
mt_site_unfree(uint32_t id, int kind, int64_t bytes, int64_t count) {
	/* a free undone: a free of minus the bytes and count, atomic if shared */
	charge_slow(id, kind, -bytes, -count, 0, 0);
}

/* A site's at-peak share, against epoch e. */
static inline int64_t
at_peak_of(const struct mt_site *s, uint32_t e) {
	return s->atpeak_epoch == e ? s->atpeak_bytes : s->live_bytes;
}

/* Thread slot t's figures of site id, or NULL (no array, or it never
 * charged that id's chunk). */
static inline const struct mt_site *
share_of(uint32_t t, uint32_t id) {
	struct mt_chunked *c = __atomic_load_n(&tsites[t], __ATOMIC_ACQUIRE);
	return c ? mt_chunk_at(c, id) : NULL;
}

int
mt_site_read(uint32_t id, int kind, struct mt_site *out) {
	struct mt_site *g = mt_site_get(id, kind);
	if (!g)
		return 0;
	uint32_t e = __atomic_load_n(&mt_peak_epoch[kind], __ATOMIC_RELAXED);
	*out = *g; /* racy copies, as every reader's */
	int64_t at = at_peak_of(out, e);
	int shares = 0;
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_ACQUIRE);
	for (uint32_t t = 1; t < hi; t++) {
		const struct mt_site *d = share_of(t, id);
		if (!d)
			continue;
		struct mt_site x = *d;
		out->live_bytes += x.live_bytes;
		out->allocs += x.allocs;
		out->alloc_bytes += x.alloc_bytes;
		out->frees += x.frees;
		at += at_peak_of(&x, e);
		shares = 1;
	}
	out->atpeak_bytes = at;
	out->atpeak_epoch = e;
	if (shares) { /* the highest the writer has seen (see above) */
		int64_t p = out->live_bytes > at ? out->live_bytes : at;
		if (p > out->peak_bytes) {
			int64_t was = out->peak_bytes;
			out->peak_bytes = p;
			if (mt_raise_peak(&g->peak_bytes, p))
				peak_stamp(g, was, p, 0);
		}
	}
	return out->allocs != 0;
}

int
mt_site_charged(uint32_t id) {
	const struct mt_site *g = mt_site_get(id, 0);
	if (g && __atomic_load_n(&g->allocs, __ATOMIC_RELAXED))
		return 1;
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_ACQUIRE);
	for (uint32_t t = 1; t < hi; t++) {
		const struct mt_site *d = share_of(t, id);
		if (d && __atomic_load_n(&d->allocs, __ATOMIC_RELAXED))
			return 1;
	}
	return 0;
}

void
mt_totals_alloc(int kind, uint64_t bytes) {
	struct mt_totals *t = &mt_totals[kind];
	mt_add(&t->allocs, 1);
	mt_add(&t->alloc_bytes, bytes);
	mt_add(&t->live_count, 1);
	if (mt_raise_peak(&t->peak_bytes, mt_add(&t->live_bytes, (int64_t)bytes)))
		mt_peak_moved(kind);
}

void
mt_totals_free(int kind, uint64_t bytes, int whole) {
	struct mt_totals *t = &mt_totals[kind];
	mt_add(&t->live_bytes, -(int64_t)bytes);
	mt_add(&t->free_bytes, bytes);
	if (whole) {
		mt_add(&t->frees, 1);
		mt_add(&t->live_count, -1);
	}
}

void
mt_sites_prefork(void) {
	mt_lock(&stack_lock);
}

void
mt_sites_postfork_parent(void) {
	mt_unlock(&stack_lock);
}

void
mt_sites_postfork_child(int fresh) {
	stack_lock.v = 0;
	if (!fresh)
		return;
	/* The child's figures start from zero; its stacks are the parent's. */
	mt_chunk_reset(&sites);
	for (uint32_t t = 0; t < tsites_hi; t++)
		if (tsites[t])
			mt_chunk_reset(tsites[t]);
	/* one thread now: the figures are split only if it has a share */
	sites_split = my_sites != NULL;
	memset(mt_totals, 0, sizeof mt_totals);
	memset(mt_peak_epoch, 0, sizeof mt_peak_epoch);
	memset(mt_tcounts, 0, sizeof mt_tcounts);
	mt_sites_dropped = 0;
}

uint64_t
mt_sites_memory(uint64_t *stack_bytes, uint64_t *site_bytes) {
	*stack_bytes = stacks.mapped + arena_bytes + index_bytes;
	*site_bytes = sites.mapped + __atomic_load_n(&tsites_bytes, __ATOMIC_RELAXED);
	uint32_t hi = __atomic_load_n(&tsites_hi, __ATOMIC_ACQUIRE);
	for (uint32_t t = 1; t < hi; t++) {
		struct mt_chunked *c = __atomic_load_n(&tsites[t], __ATOMIC_ACQUIRE);
		if (c)
			*site_bytes += __atomic_load_n(&c->mapped, __ATOMIC_RELAXED);
	}
	return *stack_bytes + *site_bytes;
}
