/*
 * python.c — Python frames: which Python line allocated (the capture; the
 * interpreter is found by pyfind.c, the records written by pyrecords.c,
 * what they share is pyint.h).
 *
 *  - At each tracked allocation the allocating thread walks its *own*
 *    frame chain, found through PyGILState_GetThisThreadState (per thread,
 *    valid while the GIL is released; never the "current thread state"
 *    getters, which give the GIL holder's, or nothing).  Only plain loads;
 *    the loop is bounded; the finalizing flag is checked first.
 *  - The walk yields (code object, instruction index, entry bit) per frame.
 *    A thread-local cache of recent walks by their 64-bit hash short-cuts
 *    the common case (a Python stack that allocated before: the lines of
 *    a loop body take turns).  On a miss, under py_lock, each
 *    code object gets a serial number at first sight (its file and
 *    qualified name are copied then, as UTF-8 from the compact str layout),
 *    each (serial, instruction) its line (our own readers of the PEP 626
 *    table of 3.10 and the location table of 3.11+), frames are interned by
 *    (serial, line) and stacks by their frames and entry bits.
 *  - The executing frame pins its code object, so reading it on the
 *    allocating thread is safe.  When a code object dies, our wrapper of
 *    PyCode_Type.tp_dealloc drops its serial: a new code object at the
 *    same address gets a new serial, so recycled addresses never produce
 *    old lines; records already written keep their ids (nothing re-keyed).
 *  - The entry bit marks the outermost Python frame of one activation of
 *    the eval loop, so the analysis can put each run of Python frames where
 *    its _PyEval_EvalFrameDefault frame is in the native stack.
 *
 * Rules: never calls malloc (memory from mmap, raw syscalls); capture may
 * run inside malloc in any thread; py_lock is held for table work only,
 * never across a call out; fork handlers take it.
 */
#include "platform/glue.h"
#include "capture/pyint.h"
#include "capture/python.h"
#include "platform/config.h"
#include "platform/tmem.h"
#include "state/map64.h"
#include <string.h>

#define MAXSTR 1024       /* bytes of a file name or qualified name kept */
#define ARENA (1u << 20)  /* string and frame-list arenas */

int mt_py_on;

/* ---- tables (under py_lock) ------------------------------------------ */

struct mt_pytables mt_pyt = {
	.code = {.elem = sizeof(struct pycode)},
	.frame = {.elem = sizeof(struct pyframe)},
	.stack = {.elem = sizeof(struct pystack)},
	.ncodes = 1, .nframes = 1, .nstacks = 1, /* ids from 1 */
};
static mt_lock_t py_lock;
static struct mt_map64 codes;  /* code object address -> serial, live ones only */
static struct mt_map64 lasti;  /* serial << 32 | instruction -> pyframe id */
static struct mt_map64 lines;  /* serial << 32 | line -> pyframe id */
static struct mt_map64 stackix; /* pystack hash -> id (collisions probed on) */
static char *str_arena;
static size_t str_used = ARENA;
static char *id_arena;
static size_t id_used = ARENA;
static uint64_t py_bytes, py_retired, py_dropped;
static uint64_t epoch;     /* bumped when a known code object dies */

static void *
arena_take(char **arena, size_t *used, size_t bytes) {
	if (bytes > ARENA)
		return NULL;
	if (*used + bytes > ARENA) {
		char *a = mt_sys_mmap(ARENA);
		if (!a)
			return NULL;
		py_bytes += ARENA;
		*arena = a;
		*used = 0;
	}
	void *p = *arena + *used;
	*used += (bytes + 7) & ~(size_t)7;
	return p;
}

/* ---- reading CPython's objects ---------------------------------------- */

static inline uintptr_t
rd(uintptr_t a) {
	return *(const volatile uintptr_t *)a;
}

/* A str object as UTF-8 in the string arena; "?" when it is not a compact
 * str (it always is for file and qualified names). */
static const char *
str_copy(uintptr_t s) {
	char tmp[MAXSTR + 4];
	size_t n = mt_py_str_utf8(s, tmp, MAXSTR);
	if (!n)
		tmp[n++] = '?';
	char *dst = arena_take(&str_arena, &str_used, n + 1);
	if (!dst)
		return "?";
	memcpy(dst, tmp, n);
	dst[n] = 0;
	return dst;
}

static int
code_line(uintptr_t co, int32_t li, int first, struct mt_py_lpos *pos) {
	if (li < 0)
		return first;
	uintptr_t tab = rd(co + (uintptr_t)mt_pyi.L.co_lines);
	if (!tab || rd(tab + (uintptr_t)mt_pyi.L.ob_type) != mt_pyi.bytes_type)
		return first;
	long len = *(const long *)(tab + (uintptr_t)mt_pyi.L.bytes_size);
	const uint8_t *t = (const uint8_t *)(tab + (uintptr_t)mt_pyi.L.bytes_data);
	if (len < 0 || len > (1 << 24))
		return first;
	return mt_pyi.L.lines == PY_LINES_PEP626 ? mt_py_line_pep626_at(t, len, first, (long)li * 2, pos)
					  : mt_py_line_locations_at(t, len, first, (long)li * 2, pos);
}

/* ---- capture ---------------------------------------------------------- */

struct walk {
	int n, truncated;
	int elided, elided_at; /* frames left out between [0, elided_at) and the rest */
	uint64_t rest;         /* REST_MIX of the frames from elided_at on, all of them */
	uint64_t entry, hash;
	uintptr_t code[MAXD];
	uintptr_t iword[MAXD]; /* the frame's instruction word as read (pointer or lasti) */
	int32_t lasti[MAXD];
};

/* This thread's recent walks, direct-mapped by the walk's hash, and the
 * stack each gave (epoch: valid while no known code object has died
 * since).  A hit trusts the 64-bit hash of the (code, instruction) pairs,
 * depth and entry bits: two walks that share it are 2^-64 a lookup, as
 * for native stacks (sites.c).  One entry held the last walk only (the
 * full walk, compared): a loop body's lines took turns missing it, and a
 * miss takes py_lock and two map lookups a frame. */
#define PCACHE 64
struct pcache {
	uint64_t hash, epoch;
	uint32_t id;
};

/* This thread's last walk and the stack it gave (last_id 0: none), valid
 * while epoch is last_epoch.  A capture first checks whether the thread's
 * frames still give that walk (walk_as with verify): the same code
 * objects, instructions, entry marks and depth.  A code object the last
 * walk read is known (interned when its stack was), so while no known
 * code object has died it is still one: no type check, and no hash.
 * Under `import torch`, 870 k of the 1.1 M allocations are made by the
 * C++ initializers dlopen runs, under one Python stack of 13 frames: the
 * walk and hash were ~45 instructions a frame, the check is ~12. */
/* The thread's tables: a block of the shim's own memory
 * (platform/tmem.h; 3 KiB), not TLS, made at its first capture, reached
 * through one TLS pointer. */
struct py_thread {
	struct walk last_walk;
	uint32_t last_id;
	uint64_t last_epoch;
	struct pcache pcache[PCACHE];
};
static MT_TLS struct py_thread *me;
static struct mt_tpool pool = MT_TPOOL(sizeof(struct py_thread));

/* The frames past a deep walk's inner ones, mixed: what a check of the
 * thread's last walk compares when that walk kept both ends (two
 * multiplies a frame, where the walk's own is ~75 instructions). */
#define REST_MIX(r, co, iw, marked)                                                    \
	((((r) ^ (co)) * 0x9e3779b97f4a7c15ull ^ (iw) ^ (uint64_t)(marked) << 63) *   \
	 0xc2b2ae3d27d4eb4full)
#define REST_OWNER(r) (((r) ^ 0x165667b19e3779f9ull) * 0x9e3779b97f4a7c15ull)

/* The outer ring of a walk past its depth (slots [at, at + tail), the
 * frame that is now the outermost kept at slot at + r) put in order. */
static void
ring_order(struct walk *w, uint64_t *ent, int at, int tail, int r) {
	uintptr_t code[MAXD / 4], iword[MAXD / 4]; /* tail: a quarter of the depth */
	int32_t li[MAXD / 4];
	uint64_t bits = 0;
	for (int j = 0; j < tail; j++) {
		int o = at + (r + j) % tail;
		code[j] = w->code[o], iword[j] = w->iword[o], li[j] = w->lasti[o];
		bits |= (*ent >> o & 1) << j;
	}
	for (int j = 0; j < tail; j++) {
		w->code[at + j] = code[j], w->iword[at + j] = iword[j], w->lasti[at + j] = li[j];
		*ent = (*ent & ~(1ull << (at + j))) | (bits >> j & 1) << (at + j);
	}
}

/* A frame's instruction word as read (the int lasti, or the pointer) and
 * whether it carries its own entry mark, for the walk's two loops. */
static inline __attribute__((always_inline)) uintptr_t
instr_word(uintptr_t f, uintptr_t o_instr, int instr) {
	return instr == PY_INSTR_LASTI ? (uint32_t)*(const volatile int32_t *)(f + o_instr)
				       : rd(f + o_instr);
}

static inline __attribute__((always_inline)) int
entry_marked(uintptr_t f, uintptr_t o_entry, int entry) {
	return entry == PY_ENTRY_EVERY ||
	       (entry == PY_ENTRY_FLAG && *(const volatile uint8_t *)(f + o_entry));
}

/* A frame layout's offsets, read into locals once a walk (as fields of
 * mt_pyi.L they were loaded again for every frame). */
struct py_offs {
	uintptr_t code, prev, instr, owner, entry, type, ctype;
	int skip;
};

/* A check of the thread's last walk *w (walk_as with verify) from frame
 * *fp: its inner frames compared (code object and raw instruction word;
 * a frame owned by the C stack between them passed as the walk passes
 * it), 0 at the first that differs; for a walk that kept both ends, the
 * frames past them mixed (REST_MIX) and counted: the answer (0 or 1).
 * Else -1, and where the walk's own loop goes on (*fp, *np, ...). */
static inline __attribute__((always_inline)) int
verify_inner(const struct py_offs *o, const struct walk *w, int entry, int instr, uintptr_t *fp,
	     int *np, int *stepsp, uint64_t *entp) {
	uintptr_t f = *fp;
	int n = 0, steps = 0;
	uint64_t ent = 0, rest = 0;
	const int want = w->elided ? w->elided_at : w->n;
	for (; n < want; n++, steps++) {
		if (!f)
			return 0;
		if (entry == PY_ENTRY_CSTACK) {
			while (*(const volatile uint8_t *)(f + o->owner) == 3) {
				if (n)
					ent |= 1ull << (n - 1);
				f = rd(f + o->prev);
				if (!f || ++steps >= 4 * MAXD)
					return 0;
			}
		}
		if (rd(f + o->code) != w->code[n] || instr_word(f, o->instr, instr) != w->iword[n])
			return 0;
		if (entry_marked(f, o->entry, entry))
			ent |= 1ull << n;
		f = rd(f + o->prev);
	}
	if (w->elided) {
		int m = 0;
		for (; f && steps < MT_PY_MAXWALK; steps++, f = rd(f + o->prev)) {
			if (entry == PY_ENTRY_CSTACK &&
			    *(const volatile uint8_t *)(f + o->owner) == 3) {
				if (!m && n)
					ent |= 1ull << (n - 1);
				rest = REST_OWNER(rest);
				continue;
			}
			uintptr_t co = rd(f + o->code);
			if (!co || rd(co + o->type) != o->ctype) {
				if (!o->skip)
					break;
				continue;
			}
			rest = REST_MIX(rest, co, instr_word(f, o->instr, instr),
					entry_marked(f, o->entry, entry));
			m++;
		}
		const uint64_t mask = (1ull << want) - 1;
		return n + m == w->n + w->elided && rest == w->rest &&
		       (ent & mask) == (w->entry & mask);
	}
	*fp = f, *np = n, *stepsp = steps, *entp = ent;
	return -1;
}

/* A walk's end (not verify): the ring put in order when it kept both
 * ends, its depth, entry bits and hash. */
static inline __attribute__((always_inline)) int
walk_done(struct walk *w, int n, int truncated, uint64_t ent, uint64_t a, uint64_t b, uint64_t rest,
	  int max, int keep_in, int tail) {
	w->elided = 0;
	w->elided_at = 0;
	w->rest = rest;
	if (n > max) { /* the ring in order, outermost last */
		w->elided = n - max;
		w->elided_at = keep_in;
		truncated = 1;
		ring_order(w, &ent, keep_in, tail, (n - max) % tail);
		n = max;
	}
	w->n = n;
	w->truncated = truncated;
	w->entry = ent;
	w->hash = mt_mix64(a ^ (b << 32 | b >> 32) ^ mt_mix64(rest) ^
			   mt_mix64(ent ^ ((uint64_t)(n + w->elided) << 1 | (uint64_t)truncated) *
				    0x165667b19e3779f9ull));
	return n;
}

/* The walk for one layout's kinds of entry mark and instruction (entry,
 * instr: constants where walk calls it, so each frame tests neither).
 * The layout's offsets are read into locals first: as fields of L they
 * were loaded again for every frame.  The hash is taken as the frames
 * are read, in two lanes (the code objects, the instructions with their
 * depth) side by side: one chain of multiplies a frame was a fifth of a
 * capture; depth, truncation and entry bits are mixed in at the end.
 *
 * verify (a constant too): compare the frames with *w (the thread's last
 * walk) instead of recording them; 1 when they give the same walk:
 * verify_inner compares its frames first; what follows them (the end of
 * the chain, or the code frame that made the last walk a truncated one)
 * goes through the walk's own loop. */
static inline __attribute__((always_inline)) int
walk_as(uintptr_t ts, struct walk *w, int entry, int instr, int verify) {
	const uintptr_t o_code = (uintptr_t)mt_pyi.L.fr_code, o_prev = (uintptr_t)mt_pyi.L.fr_prev,
			o_instr = (uintptr_t)mt_pyi.L.fr_instr, o_owner = (uintptr_t)mt_pyi.L.fr_owner,
			o_entry = (uintptr_t)mt_pyi.L.fr_entry, o_type = (uintptr_t)mt_pyi.L.ob_type,
			o_cocode = (uintptr_t)mt_pyi.L.co_code, ctype = mt_pyi.code_type;
	const int skip = mt_pyi.L.skip_non_code, max = (int)mt_cfg.pydepth;
	const struct py_offs O = {o_code, o_prev, o_instr, o_owner, o_entry, o_type, ctype, skip};
	/* Past max frames both ends are kept: the innermost keep_in, and the
	 * outermost tail in a ring over the last slots (the script's own
	 * lines are the outermost: a Trainer puts 30-60 library frames
	 * between them and the allocation).  Below 8 frames, the innermost. */
	const int tail = max >= 8 ? max / 4 : 0, keep_in = max - tail;
#define PY_SLOT(k) ((k) < max ? (k) : keep_in + ((k) - keep_in) % tail)
	uintptr_t f = rd(ts + (uintptr_t)mt_pyi.L.ts_frame);
	if (mt_pyi.L.cf_current >= 0)
		f = f ? rd(f + (uintptr_t)mt_pyi.L.cf_current) : 0;
	int n = 0, truncated = 0, steps = 0;
	uint64_t ent = 0, a = 0x9e3779b97f4a7c15ull, b = 0xc2b2ae3d27d4eb4full;
	uint64_t rest = 0;
	if (verify) {
		int r = verify_inner(&O, w, entry, instr, &f, &n, &steps, &ent);
		if (r >= 0)
			return r;
	}
	for (; f && steps < MT_PY_MAXWALK; steps++) {
		if (entry == PY_ENTRY_CSTACK &&
		    *(const volatile uint8_t *)(f + o_owner) == 3) {
			/* FRAME_OWNED_BY_CSTACK: an activation of the eval loop
			 * starts below; the frame above it is the entry */
			if (n)
				ent |= 1ull << PY_SLOT(n - 1);
			if (n >= keep_in && tail)
				rest = REST_OWNER(rest);
			f = rd(f + o_prev);
			continue;
		}
		uintptr_t co = rd(f + o_code);
		if (!co || rd(co + o_type) != ctype) {
			if (!skip)
				break;
			f = rd(f + o_prev); /* 3.13: None */
			continue;
		}
		if (n == max && !tail) {
			truncated = 1;
			break;
		}
		if (verify)
			return 0; /* a frame more than the last walk had */
		const int slot = PY_SLOT(n);
		uintptr_t iw = instr_word(f, o_instr, instr);
		/* the pointer: code units of 2 bytes from the code's start */
		int32_t li = instr == PY_INSTR_LASTI ? (int32_t)(uint32_t)iw
			     : iw ? (int32_t)((intptr_t)(iw - (co + o_cocode)) >> 1)
				  : -1;
		ent &= ~(1ull << slot);
		const int marked = entry_marked(f, o_entry, entry);
		if (marked)
			ent |= 1ull << slot;
		w->code[slot] = co;
		w->iword[slot] = iw;
		w->lasti[slot] = li;
		if (n >= keep_in && tail) { /* the hash takes them as rest */
			rest = REST_MIX(rest, co, iw, marked);
		} else {
			a = mt_mix64(a ^ co);
			b = mt_mix64(b ^ ((uint64_t)(uint32_t)li | (uint64_t)n << 32));
		}
		n++;
		f = rd(f + o_prev);
	}
	if (verify)
		return n == w->n && truncated == w->truncated && ent == w->entry;
#undef PY_SLOT
	return walk_done(w, n, truncated, ent, a, b, rest, max, keep_in, tail);
}

static int
walk(uintptr_t ts, struct walk *w, int verify) {
	if (mt_pyi.L.instr == PY_INSTR_POINTER && mt_pyi.L.entry == PY_ENTRY_FLAG) /* 3.11 */
		return verify ? walk_as(ts, w, PY_ENTRY_FLAG, PY_INSTR_POINTER, 1)
			      : walk_as(ts, w, PY_ENTRY_FLAG, PY_INSTR_POINTER, 0);
	if (mt_pyi.L.instr == PY_INSTR_POINTER && mt_pyi.L.entry == PY_ENTRY_CSTACK) /* 3.12+ */
		return verify ? walk_as(ts, w, PY_ENTRY_CSTACK, PY_INSTR_POINTER, 1)
			      : walk_as(ts, w, PY_ENTRY_CSTACK, PY_INSTR_POINTER, 0);
	return verify ? walk_as(ts, w, mt_pyi.L.entry, mt_pyi.L.instr, 1) : walk_as(ts, w, mt_pyi.L.entry, mt_pyi.L.instr, 0);
}

/* Under py_lock.  The code object is pinned by its executing frame. */
static uint32_t
frame_id(uintptr_t co, int32_t li) {
	uint32_t serial = mt_map64_get(&codes, co);
	if (!serial) {
		if (mt_chunk_ensure(&mt_pyt.code, mt_pyt.ncodes))
			return 0;
		struct pycode *c = mt_chunk_at(&mt_pyt.code, mt_pyt.ncodes);
		c->file = str_copy(rd(co + (uintptr_t)mt_pyi.L.co_file));
		c->name = str_copy(rd(co + (uintptr_t)mt_pyi.L.co_name));
		c->first = *(const int32_t *)(co + (uintptr_t)mt_pyi.L.co_first);
		c->pos = (struct mt_py_lpos){0};
		if (mt_map64_put(&codes, co, mt_pyt.ncodes))
			return 0;
		serial = mt_pyt.ncodes++;
	}
	uint64_t k = (uint64_t)serial << 32 | (uint32_t)li;
	uint32_t id = mt_map64_get(&lasti, k);
	if (id)
		return id;
	struct pycode *c = mt_chunk_at(&mt_pyt.code, serial);
	int line = code_line(co, li, c->first, &c->pos);
	uint64_t lk = (uint64_t)serial << 32 | (uint32_t)line;
	id = mt_map64_get(&lines, lk);
	if (!id) {
		if (mt_chunk_ensure(&mt_pyt.frame, mt_pyt.nframes))
			return 0;
		struct pyframe *p = mt_chunk_at(&mt_pyt.frame, mt_pyt.nframes);
		p->code = serial;
		p->line = line;
		if (mt_map64_put(&lines, lk, mt_pyt.nframes))
			return 0;
		id = mt_pyt.nframes;
		mt_store(&mt_pyt.nframes, mt_pyt.nframes + 1);
	}
	return mt_map64_put(&lasti, k, id) ? 0 : id;
}

static uint32_t
stack_id(const struct walk *w) {
	uint32_t ids[MAXD];
	uint64_t h = 0x51ed270b27d5a3b9ull ^ w->entry ^ (uint64_t)w->truncated << 63 ^
		     (uint64_t)w->elided << 40;
	for (int i = 0; i < w->n; i++) {
		if (!(ids[i] = frame_id(w->code[i], w->lasti[i])))
			return 0;
		h = mt_map64_mix(h ^ ids[i]) + (uint64_t)i;
	}
	h |= 1;
	/* probe the index by hash; equal hashes are compared in full */
	if (stackix.k) {
		for (uint64_t i = mt_map64_mix(h) & stackix.mask; stackix.k[i]; i = (i + 1) & stackix.mask) {
			if (stackix.k[i] != h)
				continue;
			struct pystack *s = mt_chunk_at(&mt_pyt.stack, stackix.v[i]);
			if (s->n == w->n && s->entry == w->entry &&
			    s->truncated == w->truncated && s->elided == (uint32_t)w->elided &&
			    !memcmp(s->frames, ids, (size_t)w->n * sizeof ids[0]))
				return stackix.v[i];
		}
	}
	if (mt_pyt.nstacks >= mt_cfg.max_stacks || mt_chunk_ensure(&mt_pyt.stack, mt_pyt.nstacks))
		return 0;
	uint32_t *fr = arena_take(&id_arena, &id_used, (size_t)w->n * sizeof ids[0]);
	if (!fr)
		return 0;
	memcpy(fr, ids, (size_t)w->n * sizeof ids[0]);
	struct pystack *s = mt_chunk_at(&mt_pyt.stack, mt_pyt.nstacks);
	s->hash = h;
	s->entry = w->entry;
	s->frames = fr;
	s->n = (uint8_t)w->n;
	s->truncated = (uint8_t)w->truncated;
	s->elided = (uint32_t)w->elided;
	s->elided_at = (uint8_t)w->elided_at;
	/* several stacks may share a hash: a new slot, not a replace */
	if (mt_map64_insert(&stackix, h, mt_pyt.nstacks))
		return 0;
	uint32_t id = mt_pyt.nstacks;
	mt_store(&mt_pyt.nstacks, id + 1);
	return id;
}

uint32_t
mt_py_capture(void) {
	if (!mt_py_on)
		return 0;
	void *ts = mt_pyi.get_tstate();
	if (!ts)
		return 0;
	if (mt_pyi.L.finalizing ? rd(mt_pyi.L.finalizing) != 0 : mt_pyi.is_finalizing())
		return 0;
	struct py_thread *t = me;
	if (MT_UNLIKELY(!t) && !(t = me = mt_tmem_claim(&pool)))
		return 0; /* no memory for its tables */
	struct walk *w = &t->last_walk;
	uint64_t ep = __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
	if (t->last_id && t->last_epoch == ep && walk((uintptr_t)ts, w, 1))
		return t->last_id;
	t->last_id = 0; /* w is rewritten below */
	if (!walk((uintptr_t)ts, w, 0))
		return 0;
	ep = __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
	uint64_t h = w->hash;
	struct pcache *c = &t->pcache[(h >> 20) & (PCACHE - 1)];
	if (c->id && c->hash == h && c->epoch == ep) {
		t->last_epoch = ep;
		return t->last_id = c->id;
	}
	mt_lock(&py_lock);
	uint32_t id = stack_id(w);
	ep = epoch;
	mt_unlock(&py_lock);
	if (!id) {
		mt_add(&py_dropped, 1);
		return 0;
	}
	c->hash = h;
	c->id = id;
	c->epoch = ep;
	t->last_epoch = ep;
	return t->last_id = id;
}

/* PyCode_Type.tp_dealloc: forget the serial of a dying code object before
 * its memory can be reused.  Runs with the GIL held, on the thread that
 * dropped the last reference; never calls out while holding py_lock. */
static void
code_dealloc(void *co) {
	if (__atomic_load_n(&codes.used, __ATOMIC_RELAXED)) {
		mt_lock(&py_lock);
		if (mt_map64_del(&codes, (uint64_t)co)) {
			py_retired++;
			__atomic_add_fetch(&epoch, 1, __ATOMIC_RELEASE);
		}
		mt_unlock(&py_lock);
	}
	mt_pyi.real_code_dealloc(co);
}

void
mt_py_init(void) {
	if (mt_py_find(code_dealloc))
		__atomic_store_n(&mt_py_on, 1, __ATOMIC_RELEASE);
}

int
mt_py_finalizing(void) {
	if (!__atomic_load_n(&mt_py_on, __ATOMIC_ACQUIRE))
		return 0;
	if (mt_pyi.L.finalizing)
		return rd(mt_pyi.L.finalizing) != 0;
	return mt_pyi.is_finalizing && mt_pyi.is_finalizing();
}

void
mt_py_stats(uint64_t *stacks, uint64_t *frames, uint64_t *retired,
	    uint64_t *dropped, uint64_t *bytes) {
	*stacks = mt_load(&mt_pyt.nstacks) - 1;
	*frames = mt_load(&mt_pyt.nframes) - 1;
	*retired = __atomic_load_n(&py_retired, __ATOMIC_RELAXED);
	*dropped = __atomic_load_n(&py_dropped, __ATOMIC_RELAXED);
	*bytes = py_bytes + codes.bytes + lasti.bytes + lines.bytes + stackix.bytes + mt_pyt.code.mapped + mt_pyt.frame.mapped + mt_pyt.stack.mapped;
}

void
mt_py_prefork(void) {
	mt_lock(&py_lock);
}

void
mt_py_postfork_parent(void) {
	mt_unlock(&py_lock);
}
