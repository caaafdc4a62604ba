/*
 * cfi.c — the shim's own stack walker (cfi.h): each frame's call frame
 * information (.eh_frame, found through .eh_frame_hdr's sorted table)
 * reduced to one rule a return address, kept in a table all threads
 * share behind a small cache per thread, so a return address seen before
 * costs a probe of that cache instead of libunwind's ~1,300 instructions a
 * capture (its cursor set-up) and its first-time lookups (dl_iterate_phdr
 * under a signal mask: two syscalls each); and a walk takes the frames it
 * shares with the thread's last walk from that walk (mt_cfi_walk).
 *
 * A rule holds what x86-64 code nearly always does: the CFA is rsp or rbp
 * plus a constant, the return address is at CFA - 8, and rbp is either
 * saved at CFA + a constant or not touched.  Anything else (a CFA given by
 * a DWARF expression, as in PLT entries and signal trampolines; a return
 * address kept elsewhere; a frame in code no loaded object holds, such as
 * a JIT's) is a rule of kind UNSUPPORTED, and the capture that meets it is
 * done again by libunwind from the start: the walker never guesses.
 *
 * Rules: never calls malloc; takes no lock (the rule table is lock free,
 * _dl_find_object is lock free by glibc's contract); reads of the stack
 * stay inside the calling thread's stack mapping, so a wrong rule ends a
 * walk early rather than faulting.  Async-signal-safe.
 */
#include "platform/glue.h"
#include "capture/cfi.h"
#include <dlfcn.h>
#include <string.h>

enum { UNSUPPORTED = 0, STEP = 1, OUTERMOST = 2 };

/* One return address's rule, a word:
 *   bits 0-31  cfa_off: CFA = (cfa_rbp ? rbp : rsp) + cfa_off
 *   bits 32-47 rbp_off: rbp saved at CFA + rbp_off; 0: rbp unchanged
 *   bit 48     cfa_rbp
 *   bits 56-63 kind: UNSUPPORTED, STEP, OUTERMOST (return address undefined)
 * UNSUPPORTED is the word 0. */
#define RULE(kind, cfa_rbp, cfa_off, rbp_off)                                  \
	((uint64_t)(kind) << 56 | (uint64_t)(cfa_rbp) << 48 |                  \
	 (uint64_t)(uint16_t)(rbp_off) << 32 | (uint64_t)(uint32_t)(cfa_off))
#define R_KIND(w) ((unsigned)((w) >> 56))
#define R_CFA_RBP(w) ((w) >> 48 & 1)
#define R_CFA_OFF(w) ((intptr_t)(int32_t)(uint32_t)(w))
#define R_RBP_OFF(w) ((intptr_t)(int16_t)(uint16_t)((w) >> 32))

/* ---- the rule table ----------------------------------------------------
 * 2^17 entries of (key, rule).  key = pc (48 bits) | generation << 48
 * (15 bits) | PENDING (bit 63).  An inserter claims an empty or stale
 * (older generation) entry with a CAS to pc | gen | PENDING, writes the
 * rule, then publishes the key without PENDING (release); a reader loads
 * the key (acquire), the rule, and the key again: unchanged means the rule
 * is that key's.  Nobody waits on a PENDING entry (a signal handler that
 * interrupts an inserter computes its own rule and inserts nothing).
 * dlclose bumps the generation (mt_cfi_forget): every older entry is
 * stale at once, and an unloaded object's rules cannot serve a new one
 * mapped at the same address.  The keys hold its low 15 bits: when those
 * wrap to 0 (every 32768 dlcloses) every key is cleared, so an entry of
 * 32768 generations ago cannot come back (only one put racing with that
 * clear could).  Entries are never removed otherwise; a full
 * neighbourhood (PROBES entries) means the rule is computed each time. */
#define TAB_BITS 17
#define TAB_SIZE ((uint64_t)1 << TAB_BITS)
#define PROBES 16
#define PC_MASK ((1ull << 48) - 1)
#define GEN_SHIFT 48
#define GEN_MASK 0x7fffull
#define PENDING (1ull << 63)

struct entry {
	uint64_t key;
	uint64_t rule;
};

static struct entry *tab;
static uint64_t gen; /* dlcloses; the keys hold gen & GEN_MASK */
/* the table's pages that hold an entry: its memory as the process sees it */
#define TAB_PAGES (TAB_SIZE * sizeof(struct entry) / 4096)
static uint64_t touched[TAB_PAGES / 64], touched_bytes;
static uint64_t handed; /* walks given up (mt_cfi_handed) */
static int (*find_object)(void *, struct dl_find_object *);

static inline uint64_t
pc_hash(uintptr_t pc) {
	uint64_t h = (uint64_t)pc * 0x9e3779b97f4a7c15ull;
	return h >> (64 - TAB_BITS);
}

/* 1 and *r when pc's rule is in the table. */
static inline int
tab_get(uintptr_t pc, uint64_t g, uint64_t *r) {
	uint64_t want = (uint64_t)pc | g << GEN_SHIFT;
	uint64_t i = pc_hash(pc);
	for (int k = 0; k < PROBES; k++, i = (i + 1) & (TAB_SIZE - 1)) {
		struct entry *e = &tab[i];
		uint64_t key = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
		if (key == want) {
			uint64_t w = __atomic_load_n(&e->rule, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) != want)
				return 0;
			*r = w;
			return 1;
		}
		if (!key)
			return 0;
	}
	return 0;
}

static void
tab_put(uintptr_t pc, uint64_t g, uint64_t r) {
	uint64_t i = pc_hash(pc);
	for (int k = 0; k < PROBES; k++, i = (i + 1) & (TAB_SIZE - 1)) {
		struct entry *e = &tab[i];
		uint64_t key = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
		int stale = key && !(key & PENDING) && (key >> GEN_SHIFT & GEN_MASK) != g;
		if (key && !stale) {
			if ((key & PC_MASK) == pc)
				return; /* there, or being put there */
			continue;
		}
		uint64_t claim = (uint64_t)pc | g << GEN_SHIFT | PENDING;
		if (!__atomic_compare_exchange_n(&e->key, &key, claim, 0, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&e->rule, r, __ATOMIC_RELAXED);
		__atomic_store_n(&e->key, claim & ~PENDING, __ATOMIC_RELEASE);
		uint64_t pg = i * sizeof *e / 4096, bit = 1ull << (pg & 63);
		if (!(__atomic_fetch_or(&touched[pg >> 6], bit, __ATOMIC_RELAXED) & bit))
			__atomic_add_fetch(&touched_bytes, 4096, __ATOMIC_RELAXED);
		return;
	}
}

/* ---- reading .eh_frame ------------------------------------------------ */

/* A cursor over CFI bytes that stops (ok = 0) at the end of its range. */
struct rd {
	const uint8_t *p, *end;
	int ok;
};

static inline uint8_t
u8(struct rd *d) {
	if (d->p >= d->end) {
		d->ok = 0;
		return 0;
	}
	return *d->p++;
}

static uint64_t
uleb(struct rd *d) {
	uint64_t v = 0;
	for (int s = 0; s < 64; s += 7) {
		uint8_t b = u8(d);
		v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			return v;
	}
	d->ok = 0;
	return 0;
}

static int64_t
sleb(struct rd *d) {
	uint64_t v = 0;
	int s = 0;
	uint8_t b;
	do {
		b = u8(d);
		v |= (uint64_t)(b & 0x7f) << s;
		s += 7;
	} while ((b & 0x80) && s < 64);
	if (s < 64 && (b & 0x40))
		v |= ~0ull << s;
	return (int64_t)v;
}

static uint64_t
fixed(struct rd *d, int bytes) {
	if (d->end - d->p < bytes) {
		d->ok = 0;
		return 0;
	}
	uint64_t v = 0;
	memcpy(&v, d->p, (size_t)bytes); /* little-endian */
	d->p += bytes;
	return v;
}

/* Past a block: its ULEB128 length, then that many bytes; 0 when they
 * run past the end. */
static int
skip_block(struct rd *d) {
	uint64_t n = uleb(d);
	if (!d->ok || (uint64_t)(d->end - d->p) < n)
		return d->ok = 0;
	d->p += n;
	return 1;
}

/* DW_EH_PE_* pointer encodings: the value's form (low nibble) and what
 * it is relative to (pcrel only; others are not used by x86-64's .eh_frame). */
static int
encoded(struct rd *d, uint8_t enc, uint64_t *out) {
	if (enc == 0xff) { /* omit */
		*out = 0;
		return 1;
	}
	uintptr_t at = (uintptr_t)d->p;
	uint64_t v;
	switch (enc & 0x0f) {
	case 0x00: v = fixed(d, 8); break;                          /* absptr */
	case 0x01: v = uleb(d); break;                              /* uleb128 */
	case 0x02: v = fixed(d, 2); break;                          /* udata2 */
	case 0x03: v = fixed(d, 4); break;                          /* udata4 */
	case 0x04: v = fixed(d, 8); break;                          /* udata8 */
	case 0x09: v = (uint64_t)sleb(d); break;                    /* sleb128 */
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)fixed(d, 2); break; /* sdata2 */
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)fixed(d, 4); break; /* sdata4 */
	case 0x0c: v = fixed(d, 8); break;                          /* sdata8 */
	default: return 0;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += at; break; /* pcrel */
	default: return 0;
	}
	*out = v;
	return d->ok;
}

/* The frame state a CFA program builds. */
enum { R_SAME = 0, R_OFFSET, R_UNDEF, R_OTHER };
struct state {
	int64_t cfa_off;
	int cfa_reg;      /* DWARF register: 6 rbp, 7 rsp; -1 an expression */
	int rbp, ra;      /* R_* */
	int64_t rbp_off, ra_off;
};

#define DW_RBP 6
#define DW_RSP 7
#define DW_RA 16
#define STACK_STATES 8

struct prog {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	struct state init; /* after the CIE's initial instructions */
};

static void
set_reg(struct state *s, uint64_t reg, int how, int64_t off) {
	if (reg == DW_RBP) {
		s->rbp = how;
		s->rbp_off = off;
	} else if (reg == DW_RA) {
		s->ra = how;
		s->ra_off = off;
	}
}

/* A register's rule back to the CIE's initial one. */
static void
restore_reg(struct state *s, const struct prog *pg, uint64_t reg) {
	if (reg == DW_RBP)
		set_reg(s, reg, pg->init.rbp, pg->init.rbp_off);
	else if (reg == DW_RA)
		set_reg(s, reg, pg->init.ra, pg->init.ra_off);
}

/* Run CFI instructions from loc while the row they describe starts at or
 * before target; 0 on an opcode this walker does not read. */
static int
run(struct rd *d, const struct prog *pg, struct state *s, uint64_t loc, uint64_t target) {
	struct state saved[STACK_STATES];
	int depth = 0;
	while (d->p < d->end) {
		uint8_t op = u8(d), lo = op & 0x3f;
		uint64_t reg, adv = 0;
		int64_t off;
		switch (op >> 6) {
		case 1: /* advance_loc */
			adv = lo * pg->code_align;
			goto advance;
		case 2: /* offset */
			off = (int64_t)uleb(d) * pg->data_align;
			set_reg(s, lo, R_OFFSET, off);
			continue;
		case 3: /* restore */
			restore_reg(s, pg, lo);
			continue;
		}
		switch (op) {
		case 0x00: /* nop */
			continue;
		case 0x01: { /* set_loc */
			uint64_t to;
			if (!encoded(d, pg->fde_enc, &to) || to < loc)
				return 0;
			adv = to - loc;
			goto advance;
		}
		case 0x02: adv = fixed(d, 1) * pg->code_align; goto advance;
		case 0x03: adv = fixed(d, 2) * pg->code_align; goto advance;
		case 0x04: adv = fixed(d, 4) * pg->code_align; goto advance;
		case 0x05: /* offset_extended */
			reg = uleb(d);
			off = (int64_t)uleb(d) * pg->data_align;
			set_reg(s, reg, R_OFFSET, off);
			continue;
		case 0x06: /* restore_extended */
			restore_reg(s, pg, uleb(d));
			continue;
		case 0x07: set_reg(s, uleb(d), R_UNDEF, 0); continue;  /* undefined */
		case 0x08: set_reg(s, uleb(d), R_SAME, 0); continue;   /* same_value */
		case 0x09: /* register */
		case 0x14: /* val_offset */
		case 0x15: /* val_offset_sf: its LEB128 operand skips as the others' */
			reg = uleb(d);
			uleb(d);
			set_reg(s, reg, R_OTHER, 0);
			continue;
		case 0x0a: /* remember_state */
			if (depth == STACK_STATES)
				return 0;
			saved[depth++] = *s;
			continue;
		case 0x0b: /* restore_state: the whole row, CFA included (GCC
			    * remembers before an epilogue's CFA changes and
			    * restores after its ret, as libgcc and libunwind read it) */
			if (!depth)
				return 0;
			*s = saved[--depth];
			continue;
		case 0x0c: /* def_cfa */
			s->cfa_reg = (int)uleb(d);
			s->cfa_off = (int64_t)uleb(d);
			continue;
		case 0x0d: s->cfa_reg = (int)uleb(d); continue; /* def_cfa_register */
		case 0x0e: s->cfa_off = (int64_t)uleb(d); continue; /* def_cfa_offset */
		case 0x0f: /* def_cfa_expression */
			if (!skip_block(d))
				return 0;
			s->cfa_reg = -1;
			continue;
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			reg = uleb(d);
			if (!skip_block(d))
				return 0;
			set_reg(s, reg, R_OTHER, 0);
			continue;
		case 0x11: /* offset_extended_sf */
			reg = uleb(d);
			off = sleb(d) * pg->data_align;
			set_reg(s, reg, R_OFFSET, off);
			continue;
		case 0x12: /* def_cfa_sf */
			s->cfa_reg = (int)uleb(d);
			s->cfa_off = sleb(d) * pg->data_align;
			continue;
		case 0x13: s->cfa_off = sleb(d) * pg->data_align; continue; /* def_cfa_offset_sf */
		case 0x2e: uleb(d); continue; /* GNU_args_size */
		case 0x2f: /* GNU_negative_offset_extended */
			reg = uleb(d);
			off = -(int64_t)uleb(d) * pg->data_align;
			set_reg(s, reg, R_OFFSET, off);
			continue;
		default:
			return 0;
		}
	advance:
		if (!d->ok)
			return 0;
		loc += adv;
		if (loc > target)
			return 1;
	}
	return d->ok;
}

/* The loaded object's mapped range (_dl_find_object's): every byte of
 * unwind information read lies in it, whatever its offsets say. */
struct span {
	uintptr_t lo, hi;
};

static inline int
inside(const struct span *o, const void *p, uint64_t n) {
	uintptr_t a = (uintptr_t)p;
	return a >= o->lo && a <= o->hi && n <= o->hi - a;
}

/* The CIE at cie: its alignment factors, pointer encoding and initial
 * state; 0 for what this walker does not read (a signal frame's "S", a
 * 64-bit length, version 2 or 4 fields). */
static int
read_cie(const struct span *o, const uint8_t *cie, struct prog *pg) {
	uint32_t len;
	if (!inside(o, cie, 4))
		return 0;
	memcpy(&len, cie, 4);
	if (len == 0 || len == 0xffffffffu || !inside(o, cie + 4, len))
		return 0;
	struct rd d = {cie + 4, cie + 4 + len, 1};
	if (fixed(&d, 4) != 0) /* CIE id */
		return 0;
	uint8_t ver = u8(&d);
	if (ver != 1 && ver != 3)
		return 0;
	const char *aug = (const char *)d.p;
	size_t alen = strnlen(aug, (size_t)(d.end - d.p));
	d.p += alen + 1;
	pg->code_align = uleb(&d);
	pg->data_align = sleb(&d);
	uint64_t ra_reg = ver == 1 ? u8(&d) : uleb(&d);
	if (ra_reg != DW_RA)
		return 0;
	pg->fde_enc = 0; /* absptr */
	if (aug[0] == 'z') {
		uint64_t n = uleb(&d);
		struct rd a = {d.p, d.p + n, d.ok && (uint64_t)(d.end - d.p) >= n};
		for (size_t i = 1; i < alen && a.ok; i++) {
			uint64_t skip;
			switch (aug[i]) {
			case 'R': pg->fde_enc = u8(&a); break;
			case 'L': u8(&a); break;
			case 'P': {
				uint8_t enc = u8(&a);
				if (!encoded(&a, enc & 0x7f, &skip)) /* indirect bit aside */
					return 0;
				break;
			}
			default: return 0; /* 'S' (signal frame) and the unknown */
			}
		}
		if (!a.ok)
			return 0;
		d.p += n;
	} else if (aug[0]) {
		return 0;
	}
	pg->init = (struct state){.cfa_reg = DW_RSP, .rbp = R_SAME, .ra = R_UNDEF};
	struct rd ins = d;
	return d.ok && run(&ins, pg, &pg->init, 0, ~0ull) && ins.ok;
}

/* The FDE covering pc from the object's .eh_frame_hdr search table. */
static const uint8_t *
find_fde(const struct span *o, const uint8_t *hdr, uintptr_t pc) {
	/* version 1; eh_frame_ptr's encoding; the count's; the table's, which
	 * must be datarel sdata4 (what every linker writes) */
	if (!inside(o, hdr, 20) || hdr[0] != 1 || hdr[3] != 0x3b)
		return NULL;
	struct rd d = {hdr + 4, hdr + 4 + 16, 1};
	uint64_t ehf, count;
	if (!encoded(&d, hdr[1], &ehf) || !encoded(&d, hdr[2], &count) || !count ||
	    count > (o->hi - o->lo) / 8 || !inside(o, d.p, count * 8))
		return NULL;
	const int32_t *t = (const int32_t *)d.p; /* pairs: start, fde; relative to hdr */
	uintptr_t base = (uintptr_t)hdr;
	uint64_t lo = 0, hi = count; /* last entry with start <= pc */
	if (pc < base + (intptr_t)t[0])
		return NULL;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (base + (intptr_t)t[2 * mid] <= pc)
			lo = mid;
		else
			hi = mid;
	}
	return (const uint8_t *)(base + (intptr_t)t[2 * lo + 1]);
}

/* pc's rule, worked out from the CFI: target is the address whose row
 * applies (pc itself for the innermost frame, the call instruction's
 * last byte, pc - 1, for the others). */
static uint64_t
compute(uintptr_t target) {
	const uint64_t bad = RULE(UNSUPPORTED, 0, 0, 0);
	struct dl_find_object fo;
	if (!find_object || find_object((void *)target, &fo) != 0 || !fo.dlfo_eh_frame)
		return bad;
	const struct span obj = {(uintptr_t)fo.dlfo_map_start, (uintptr_t)fo.dlfo_map_end};
	const uint8_t *fde = find_fde(&obj, fo.dlfo_eh_frame, target);
	if (!fde || !inside(&obj, fde, 8))
		return bad;
	uint32_t len, cie_off;
	memcpy(&len, fde, 4);
	memcpy(&cie_off, fde + 4, 4);
	if (len < 8 || len == 0xffffffffu || cie_off == 0 || !inside(&obj, fde + 4, len) ||
	    (uintptr_t)fde + 4 < cie_off)
		return bad;
	struct prog pg;
	if (!read_cie(&obj, fde + 4 - cie_off, &pg))
		return bad;
	struct rd d = {fde + 8, fde + 4 + len, 1};
	uint64_t start, range;
	if (!encoded(&d, pg.fde_enc, &start) || !encoded(&d, pg.fde_enc & 0x0f, &range))
		return bad;
	if (target < start || target - start >= range)
		return bad; /* no FDE covers it */
	if (!skip_block(&d)) /* augmentation data ('z': every CIE we accept) */
		return bad;
	struct state s = pg.init;
	if (!run(&d, &pg, &s, start, target))
		return bad;
	if (s.ra == R_UNDEF)
		return RULE(OUTERMOST, 0, 0, 0);
	if ((s.cfa_reg != DW_RSP && s.cfa_reg != DW_RBP) || s.ra != R_OFFSET || s.ra_off != -8 ||
	    s.cfa_off < 8 || s.cfa_off > INT32_MAX || (s.rbp != R_SAME && s.rbp != R_OFFSET) ||
	    (s.rbp == R_OFFSET && (s.rbp_off == 0 || s.rbp_off < INT16_MIN || s.rbp_off > INT16_MAX)))
		return bad;
	return RULE(STEP, s.cfa_reg == DW_RBP, s.cfa_off, s.rbp == R_OFFSET ? s.rbp_off : 0);
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
static MT_TLS struct entry l1[1u << L1_BITS];
static MT_TLS uint64_t l1_gen;

/* A miss in the thread's cache: the shared table, else the CFI. */
static MT_NOINLINE uint64_t
rule_miss(uintptr_t pc, int inner, uint64_t g, struct entry *c) {
	uint64_t r;
	if (!tab_get(pc, g, &r)) {
		r = compute(inner ? pc : pc - 1);
		tab_put(pc, g, r);
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
	if (tab)
		return 1;
	find_object = (int (*)(void *, struct dl_find_object *))sym(RTLD_DEFAULT, "_dl_find_object");
	if (!find_object)
		return 0;
	tab = mt_sys_mmap(TAB_SIZE * sizeof *tab);
	if (!tab)
		find_object = NULL;
	return find_object != NULL;
}

uint64_t
mt_cfi_handed(void) {
	return __atomic_load_n(&handed, __ATOMIC_RELAXED);
}

uint64_t
mt_cfi_memory(void) {
	return __atomic_load_n(&touched_bytes, __ATOMIC_RELAXED);
}

void
mt_cfi_forget(void) {
	uint64_t n = __atomic_add_fetch(&gen, 1, __ATOMIC_ACQ_REL);
	if (tab && !(n & GEN_MASK)) /* the keys' generation wrapped */
		for (uint64_t i = 0; i < TAB_SIZE; i++)
			__atomic_store_n(&tab[i].key, 0, __ATOMIC_RELAXED);
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
};
static MT_TLS struct memo memos[2];
static MT_TLS unsigned memo_cur;

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

MT_NOINLINE int
mt_cfi_walk(uintptr_t *pcs, int max, uintptr_t hi, uintptr_t stop_lo, uintptr_t stop_hi,
	    uintptr_t from) {
	if (!tab || max <= 0)
		return -1;
	uintptr_t pc, sp, bp;
	int n = 0, inner = 1;
	if (from) { /* the caller's state: after the frame's ret, rsp is 16 above */
		pc = ((const uintptr_t *)from)[1];
		sp = from + 16;
		bp = ((const uintptr_t *)from)[0];
		pcs[n++] = pc;
		inner = 0;
	} else {
		__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
				 : "=r"(pc), "=r"(sp), "=r"(bp));
	}
	/* Every read lies between this frame's sp and the stack's top: each
	 * CFA must be above the one before (the main thread's stack may have
	 * grown below where it was last looked up: its bottom is not a bound). */
	uintptr_t lo = sp;
	uint64_t full = __atomic_load_n(&gen, __ATOMIC_ACQUIRE), g = full & GEN_MASK;
	struct entry *cache = l1; /* the TLS address once */
	if (MT_UNLIKELY(l1_gen != full)) { /* a dlclose since: forget them all */
		memset(l1, 0, sizeof l1);
		l1_gen = full;
	}
	const struct memo *old = &memos[memo_cur];
	struct memo *rec = &memos[memo_cur ^ 1];
	int on = old->gen == full && old->hi == hi ? old->n : 0; /* else: forgotten */
	int k = 0, j = 0, final = 1;
	if (mt_pc_in(pc, stop_lo, stop_hi))
		max = n; /* from a caller that is the stop frame */
	for (;; k++) {
		/* k: this frame's index; its pc is out already (n == k + 1) when
		 * the walk started at a caller, not for the walker's own (n == k) */
		while (j < on && old->f[j].sp < sp)
			j++;
		if (j < on && old->f[j].sp == sp && old->f[j].pc == pc && old->f[j].bp == bp) {
			/* while step j reads what it read before (frame j + 1's
			 * return address, and rbp where step j read it), frame
			 * j + 1 is the last walk's; checked only as far as the
			 * frames this walk takes */
			int m = taken(old, j, on - 1 - j < max - n ? on - 1 - j : max - n, pcs + n, lo,
				      stop_lo, stop_hi);
			if (m < 0) { /* the last taken is the stop frame: the walk ends after it */
				m = -m;
				max = n + m;
			}
			if (k < MEMO_N) /* frames j .. j+m-1, as far as the record goes */
				memcpy(rec->f + k, old->f + j,
				       (size_t)(k + m <= MEMO_N ? m : MEMO_N - k) * sizeof *rec->f);
			j += m;
			k += m;
			n += m;
			pc = old->f[j].pc;
			sp = old->f[j].sp;
			bp = old->f[j].bp;
			if (j == on - 1 && old->final && n < max) { /* it stopped here: so does this one */
				remember(rec, k, sp, pc, bp, 0);
				break;
			}
			j++; /* this frame is stepped below; the next may meet the last walk again */
		}
		if (n >= max) {
			final = 0;
			break;
		}
		remember(rec, k, sp, pc, bp, 0);
		uint64_t r = rule_of(cache, pc, k == 0 && inner, g);
		if (R_KIND(r) != STEP) {
			if (R_KIND(r) == OUTERMOST)
				break;
			mt_add(&handed, 1);
			rec->n = 0;
			memo_cur ^= 1;
			return -1;
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
		if (!pc)
			break;
		pcs[n++] = pc;
		if (mt_pc_in(pc, stop_lo, stop_hi))
			max = n; /* the stop frame: the walk ends after it */
	}
	/* The walk stopped at frame k (final: recorded, it counts) or ended
	 * before stepping it (max reached: not recorded); frames 0 .. k-1, or
	 * 0 .. k, were visited.  Past MEMO_N the record ends early. */
	k += final;
	rec->n = k < MEMO_N ? k : MEMO_N;
	rec->final = final && k <= MEMO_N;
	rec->hi = hi;
	rec->gen = full;
	memo_cur ^= 1;
	return n;
}
