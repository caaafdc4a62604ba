/*
 * stacks.c — the stack table (stacks.h).
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
 * A stack id names (frames, key), so each id is one call site with one
 * set of figures (sites.c); the figures' chunk for an id is mapped before
 * the id is published.  (Keying by frames alone cost every stack a slot
 * per kind: 1 KiB a stack.)
 */
#include "platform/glue.h"
#include "state/stacks.h"
#include "state/chunks.h"
#include "platform/tmem.h"
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
	uint16_t key;       /* mt_stack_key: the kind, and the device */
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
 * thread (in its tables: below); ids are never reused (a fork child
 * keeps its parent's stacks), so an entry never goes stale, and a table
 * a thread that ended held serves the next as well as a zeroed one. */
#define TCACHE 512
struct tentry {
	uint64_t hash; /* 0: empty (a stack's hash is odd) */
	uint64_t id;
};

struct index {
	uint64_t mask;    /* slots - 1 */
	uint32_t slot[];  /* SLOT(id, hash); 0 = empty */
};

static struct mt_chunked stacks = {.elem = sizeof(struct stack)};
/* the call sites' figures (sites.c): an id's chunk mapped before it is published */
static struct mt_chunked *figures;
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
mt_stacks_init(uint64_t max, int depth, struct mt_chunked *figs) {
	figures = figs;
	max_stacks = max < (uint64_t)MT_MAX_CHUNKS * MT_CHUNK_IDS
			     ? max
			     : (uint64_t)MT_MAX_CHUNKS * MT_CHUNK_IDS;
	frames_cap = max_stacks * (uint64_t)depth;
	cur_index = index_new(1024);
	if (!cur_index || mt_chunk_ensure(&stacks, 0))
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
hash_frames(const uintptr_t *pcs, int n, int key, uint32_t py) {
	uint64_t a = 0x9e3779b97f4a7c15ull ^ (uint64_t)n, b = 0xc2b2ae3d27d4eb4full ^ ((uint64_t)key << 48),
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

/* Whether s is (pcs[0..n), key, py) with hash h: the hash, depth, key
 * and Python stack, then its own frames; the rest (which it shares with
 * an earlier stack) by the 64-bit hash of all of them.  Walking the up
 * chain on every hit cost an exact malloc benchmark ~15% (a header per
 * step, cold); two stacks that differ only outside their own frames and
 * share the hash are 2^-64 a lookup. */
static inline int
same(const struct stack *s, uint64_t h, const uintptr_t *pcs, int n, int key, uint32_t py) {
	if (s->hash != h || s->n != (uint32_t)n || s->key != (uint32_t)key || s->py != py)
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
probe(const struct index *ix, uint64_t h, const uintptr_t *pcs, int n, int key,
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
		if (same(stack_at(id), h, pcs, n, key, py))
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

static uint32_t intern_new(const uintptr_t *pcs, int n, int key, uint32_t py,
			   uint64_t h, struct tentry *tc);

/* One frame (MEMTALLY_DEPTH=1, or a stack that is one frame): each
 * thread's ids by the frame itself, direct-mapped, checked in full (no
 * hash to compute, a leaf call: ~15 instructions where the general path
 * took ~80).  Ids are never reused: an entry never goes stale. */
#define PC1 128
struct pc1 {
	uintptr_t pc; /* 0: empty (no return address is 0) */
	uint32_t py, key, id;
};

/* The thread's tables: a block of the shim's own memory (platform/tmem.h;
 * 12 KiB), not TLS, made at its first interning, reached through one TLS
 * pointer. */
struct stacks_thread {
	struct tentry tcache[TCACHE];
	struct pc1 pc1[PC1];
};
static MT_TLS struct stacks_thread *me;
static struct mt_tpool pool = MT_TPOOL(sizeof(struct stacks_thread));

/* NULL: no memory (the caller goes without the thread's caches) */
static MT_NOINLINE struct stacks_thread *
mine_make(void) {
	return me = mt_tmem_claim(&pool);
}

uint32_t
mt_stack_intern(const uintptr_t *pcs, int n, int key, uint32_t py) {
	if (n <= 0 && !py)
		return (uint32_t)MT_KEY_KIND(key);
	if (n < 0)
		n = 0;
	uint64_t h = hash_frames(pcs, n, key, py);
	struct stacks_thread *t = me;
	struct tentry none = {0, 0}, *tc = &none; /* no tables: a cache of one, here */
	if (MT_LIKELY(t) || (t = mine_make()))
		tc = &t->tcache[(h >> 20) & (TCACHE - 1)];
	if (tc->hash == h)
		return last_stack = (uint32_t)tc->id;
	uint32_t id = probe(mt_load(&cur_index), h, pcs, n, key, py, NULL);
	if (MT_LIKELY(id)) {
		tc->hash = h;
		last_stack = (uint32_t)(tc->id = id);
		return id;
	}
	return intern_new(pcs, n, key, py, h, tc);
}

/* mt_stack_intern1's miss (c NULL: the thread has no tables yet). */
static MT_NOINLINE uint32_t
pc1_miss(uintptr_t pc, int key, uint32_t py, struct pc1 *c) {
	uint32_t id = mt_stack_intern(&pc, 1, key, py); /* makes the tables */
	if (!c && me)
		c = &me->pc1[(pc ^ pc >> 9) & (PC1 - 1)];
	if (c && id >= MT_NKINDS)
		*c = (struct pc1){pc, py, (uint32_t)key, id};
	return id;
}

uint32_t
mt_stack_intern1(uintptr_t pc, int key, uint32_t py) {
	struct stacks_thread *t = me;
	if (MT_UNLIKELY(!t))
		return pc1_miss(pc, key, py, NULL);
	struct pc1 *c = &t->pc1[(pc ^ pc >> 9) & (PC1 - 1)];
	if (MT_LIKELY(c->pc == pc && c->py == py && c->key == (uint32_t)key))
		return c->id;
	return pc1_miss(pc, key, py, c); /* out of line: the hit saves no registers */
}

/* mt_stack_intern's miss in the shared index: look again under the lock,
 * then add the stack.  Out of line: its frame (a stack's worth of frames
 * to compare with the last) would cost every hit its set-up. */
static __attribute__((noinline)) uint32_t
intern_new(const uintptr_t *pcs, int n, int key, uint32_t py, uint64_t h,
	   struct tentry *tc) {
	uint32_t id;
	mt_lock(&stack_lock);
	uint64_t slot;
	struct index *ix = cur_index;
	id = probe(ix, h, pcs, n, key, py, &slot);
	if (id)
		goto out;
	id = (uint32_t)MT_KEY_KIND(key); /* unless a new id is made below */
	if (nstacks >= max_stacks || frames_total + (uint64_t)n > frames_cap ||
	    mt_chunk_ensure(&stacks, nstacks) || mt_chunk_ensure(figures, nstacks)) {
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
		probe(ix, h, pcs, n, key, py, &slot);
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
	s->key = (uint16_t)key;
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
	return id < MT_NKINDS ? (int)id : MT_KEY_KIND((int)stack_at(id)->key);
}

int
mt_stack_device(uint32_t id) {
	return id < MT_NKINDS ? -1 : (int)(stack_at(id)->key >> 8) - 1;
}

int
mt_stack_peak_slot(uint32_t id) {
	return id < MT_NKINDS ? (int)id : mt_peak_slot(stack_at(id)->key);
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

void
mt_stacks_prefork(void) {
	mt_lock(&stack_lock);
}

void
mt_stacks_postfork_parent(void) {
	mt_unlock(&stack_lock);
}

void
mt_stacks_postfork_child(int fresh) {
	stack_lock.v = 0;
	if (fresh)
		mt_sites_dropped = 0;
}

uint64_t
mt_stacks_memory(void) {
	return stacks.mapped + arena_bytes + index_bytes;
}
