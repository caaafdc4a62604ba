/*
 * ehframe.c — .eh_frame and .eh_frame_hdr read into one rule a return
 * address (ehframe.h states the rule's forms and word).
 *
 * The reader: a cursor that stops at the end of its range (struct rd); the
 * DWARF pointer encodings x86-64's .eh_frame uses; the CIE (alignment
 * factors, pointer encoding, initial instructions); the CFA program (run:
 * the row that applies at an address, with remember/restore_state); the
 * .eh_frame_hdr binary search; and the check that the row is one a rule
 * can hold.
 *
 * Rules: as ehframe.h: pure, bounded by the object's span, never
 * allocates.
 */
#include "platform/glue.h"
#include "capture/ehframe.h"
#include <string.h>

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


/* A CFA or register rule instruction (not an advance, nop or the state
 * stack): 1 done; 0 an opcode this reader does not read, or bad bytes. */
static int
rule_op(struct rd *d, const struct prog *pg, struct state *s, uint8_t op) {
	uint64_t reg;
	int64_t off;
	switch (op) {
	case 0x05: /* offset_extended */
		reg = uleb(d);
		off = (int64_t)uleb(d) * pg->data_align;
		set_reg(s, reg, R_OFFSET, off);
		return 1;
	case 0x06: /* restore_extended */
		restore_reg(s, pg, uleb(d));
		return 1;
	case 0x07: set_reg(s, uleb(d), R_UNDEF, 0); return 1;  /* undefined */
	case 0x08: set_reg(s, uleb(d), R_SAME, 0); return 1;   /* same_value */
	case 0x09: /* register */
	case 0x14: /* val_offset */
	case 0x15: /* val_offset_sf: its LEB128 operand skips as the others' */
		reg = uleb(d);
		uleb(d);
		set_reg(s, reg, R_OTHER, 0);
		return 1;
	case 0x0c: /* def_cfa */
		s->cfa_reg = (int)uleb(d);
		s->cfa_off = (int64_t)uleb(d);
		return 1;
	case 0x0d: s->cfa_reg = (int)uleb(d); return 1; /* def_cfa_register */
	case 0x0e: s->cfa_off = (int64_t)uleb(d); return 1; /* def_cfa_offset */
	case 0x0f: /* def_cfa_expression */
		if (!skip_block(d))
			return 0;
		s->cfa_reg = -1;
		return 1;
	case 0x10: /* expression */
	case 0x16: /* val_expression */
		reg = uleb(d);
		if (!skip_block(d))
			return 0;
		set_reg(s, reg, R_OTHER, 0);
		return 1;
	case 0x11: /* offset_extended_sf */
		reg = uleb(d);
		off = sleb(d) * pg->data_align;
		set_reg(s, reg, R_OFFSET, off);
		return 1;
	case 0x12: /* def_cfa_sf */
		s->cfa_reg = (int)uleb(d);
		s->cfa_off = sleb(d) * pg->data_align;
		return 1;
	case 0x13: s->cfa_off = sleb(d) * pg->data_align; return 1; /* def_cfa_offset_sf */
	case 0x2e: uleb(d); return 1; /* GNU_args_size */
	case 0x2f: /* GNU_negative_offset_extended */
		reg = uleb(d);
		off = -(int64_t)uleb(d) * pg->data_align;
		set_reg(s, reg, R_OFFSET, off);
		return 1;
	default:
		return 0;
	}
}

/* Run CFI instructions from loc while the row they describe starts at or
 * before target; 0 on an opcode this reader does not read. */
static int
run(struct rd *d, const struct prog *pg, struct state *s, uint64_t loc, uint64_t target) {
	struct state saved[STACK_STATES];
	int depth = 0;
	while (d->p < d->end) {
		uint8_t op = u8(d), lo = op & 0x3f;
		uint64_t adv = 0;
		switch (op >> 6) {
		case 1: /* advance_loc */
			adv = lo * pg->code_align;
			goto advance;
		case 2: /* offset */
			set_reg(s, lo, R_OFFSET, (int64_t)uleb(d) * pg->data_align);
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
		default:
			if (!rule_op(d, pg, s, op))
				return 0;
			continue;
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

static inline int
inside(const struct mt_span *o, const void *p, uint64_t n) {
	uintptr_t a = (uintptr_t)p;
	return a >= o->lo && a <= o->hi && n <= o->hi - a;
}

/* The CIE at cie: its alignment factors, pointer encoding and initial
 * state; 0 for what this walker does not read (a signal frame's "S", a
 * 64-bit length, version 2 or 4 fields). */
static int
read_cie(const struct mt_span *o, const uint8_t *cie, struct prog *pg) {
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

const uint8_t *
mt_eh_find_fde(const struct mt_span *o, const uint8_t *hdr, uintptr_t pc) {
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

uint64_t
mt_eh_fde_rule(const struct mt_span *o, const uint8_t *fde, uintptr_t target) {
	const uint64_t bad = RULE(UNSUPPORTED, 0, 0, 0);
	if (!fde || !inside(o, fde, 8))
		return bad;
	uint32_t len, cie_off;
	memcpy(&len, fde, 4);
	memcpy(&cie_off, fde + 4, 4);
	if (len < 8 || len == 0xffffffffu || cie_off == 0 || !inside(o, fde + 4, len) ||
	    (uintptr_t)fde + 4 < cie_off)
		return bad;
	struct prog pg;
	if (!read_cie(o, fde + 4 - cie_off, &pg))
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

uint64_t
mt_eh_rule(const struct mt_span *o, const uint8_t *eh_frame_hdr, uintptr_t target) {
	return mt_eh_fde_rule(o, mt_eh_find_fde(o, eh_frame_hdr, target), target);
}
