/* test_ehframe — the .eh_frame reader (shim/capture/ehframe.h) on hand-built
 * bytes: a CIE and FDEs written here as a compiler would, the rule each
 * row gives (a prologue, a frame on rbp, an epilogue between
 * remember_state and restore_state, a return address left undefined), the
 * .eh_frame_hdr search table, and the refusals: a signal frame's CIE, a
 * CFA expression, an opcode the reader does not know, a return address
 * not at CFA - 8, a length that runs past the object, a CIE pointer
 * outside it, too deep a state stack, a header the search cannot read. */
#include "../test.h"
#include "capture/ehframe.h"
#include <stdint.h>
#include <string.h>

/* The "object": .eh_frame_hdr at 0, .eh_frame at EHF, code from CODE. */
#define IMG 8192
#define EHF 256
#define CODE 4096
static uint8_t img[IMG] __attribute__((aligned(16)));
static struct mt_span span;

struct em {
	size_t n; /* next byte of img */
};

static void
e8(struct em *e, unsigned v) {
	img[e->n++] = (uint8_t)v;
}

static void
e32(struct em *e, uint32_t v) {
	memcpy(img + e->n, &v, 4);
	e->n += 4;
}

static void
ebytes(struct em *e, const uint8_t *b, size_t n) {
	if (n)
		memcpy(img + e->n, b, n);
	e->n += n;
}

/* a record's length field: the bytes after it up to e->n, padded with
 * nops (DW_CFA_nop, 0) to 4 */
static void
close_record(struct em *e, size_t at) {
	while ((e->n - at) % 4)
		e8(e, 0);
	uint32_t len = (uint32_t)(e->n - at - 4);
	memcpy(img + at, &len, 4);
}

/* A CIE: version 1, augmentation aug ("zR" or ""; anything after z is
 * written with the R encoding), code alignment 1, data alignment -8,
 * return address column 16, then the initial instructions. */
static size_t
cie(struct em *e, const char *aug, int version, const uint8_t *ins, size_t nins) {
	size_t at = e->n;
	e32(e, 0); /* length, below */
	e32(e, 0); /* CIE id */
	e8(e, (unsigned)version);
	ebytes(e, (const uint8_t *)aug, strlen(aug) + 1);
	e8(e, 1);    /* code alignment */
	e8(e, 0x78); /* data alignment: sleb128 -8 */
	e8(e, 16);   /* return address register */
	if (aug[0] == 'z') {
		e8(e, (unsigned)strlen(aug) - 1); /* augmentation data: a byte a letter */
		for (const char *a = aug + 1; *a; a++)
			e8(e, 0x1b); /* R: pcrel sdata4 (S and others take none, but a byte is harmless) */
	}
	ebytes(e, ins, nins);
	close_record(e, at);
	return at;
}

/* An FDE for [start, start + range) of the CIE at cie_at (pcrel sdata4
 * start, sdata4 range, no augmentation data), then its instructions. */
static size_t
fde(struct em *e, size_t cie_at, size_t start, uint32_t range, const uint8_t *ins, size_t nins) {
	size_t at = e->n;
	e32(e, 0);
	e32(e, (uint32_t)(e->n - cie_at)); /* from this field back to the CIE */
	e32(e, (uint32_t)(int32_t)((intptr_t)start - (intptr_t)e->n)); /* pcrel */
	e32(e, range);
	e8(e, 0); /* augmentation data length */
	ebytes(e, ins, nins);
	close_record(e, at);
	return at;
}

/* CIE initial instructions: CFA = rsp + 8, return address at CFA - 8. */
static const uint8_t INIT[] = {0x0c, 7, 8, 0x90, 1};

/* A function of 64 bytes: push rbp (at 1: CFA = rsp + 16, rbp at CFA - 16),
 * mov rbp, rsp (at 4: CFA = rbp + 16), remember_state; at 50 an early
 * return's epilogue (CFA = rsp + 8); restore_state at 51, the frame on rbp
 * again until the end. */
static const uint8_t FUNC[] = {
	0x41, 0x0e, 16, 0x86, 2, /* advance 1; def_cfa_offset 16; offset r6 -16 */
	0x43, 0x0d, 6,           /* advance 3; def_cfa_register r6 */
	0x0a,                    /* remember_state */
	0x02, 46, 0x0c, 7, 8,    /* advance_loc1 46 (to 50); def_cfa r7 8 */
	0x41, 0x0b,              /* advance 1 (to 51); restore_state */
};

static const uint8_t *
at_fde(size_t off) {
	return img + off;
}

static uint64_t
rule(size_t fde_at, size_t code_off) {
	return mt_eh_fde_rule(&span, at_fde(fde_at), (uintptr_t)(img + CODE + code_off));
}

static void
reset(void) {
	memset(img, 0, sizeof img);
	span.lo = (uintptr_t)img;
	span.hi = (uintptr_t)img + sizeof img;
}

TEST(rows_of_a_function) {
	reset();
	struct em e = {EHF};
	size_t c = cie(&e, "zR", 1, INIT, sizeof INIT);
	size_t f = fde(&e, c, CODE, 64, FUNC, sizeof FUNC);
	EXPECT(rule(f, 0) == RULE(STEP, 0, 8, 0));       /* before push rbp */
	EXPECT(rule(f, 1) == RULE(STEP, 0, 16, -16));    /* the row starting at 1 */
	EXPECT(rule(f, 3) == RULE(STEP, 0, 16, -16));
	EXPECT(rule(f, 4) == RULE(STEP, 1, 16, -16));    /* on rbp */
	EXPECT(rule(f, 49) == RULE(STEP, 1, 16, -16));
	EXPECT(rule(f, 50) == RULE(STEP, 0, 8, -16));    /* the early epilogue */
	EXPECT(rule(f, 51) == RULE(STEP, 1, 16, -16));   /* restore_state: the CFA too */
	EXPECT(rule(f, 63) == RULE(STEP, 1, 16, -16));
	/* outside the FDE's range: no rule */
	EXPECT(rule(f, 64) == RULE(UNSUPPORTED, 0, 0, 0));
	EXPECT(mt_eh_fde_rule(&span, at_fde(f), (uintptr_t)(img + CODE) - 1) == 0);
	/* the word's fields as the walker reads them */
	uint64_t r = rule(f, 4);
	EXPECT(R_KIND(r) == STEP && R_CFA_RBP(r) == 1 && R_CFA_OFF(r) == 16 && R_RBP_OFF(r) == -16);
}

TEST(outermost_and_other_opcodes) {
	reset();
	struct em e = {EHF};
	size_t c = cie(&e, "zR", 1, INIT, sizeof INIT);
	/* _start: the return address undefined */
	static const uint8_t undef[] = {0x07, 16};
	size_t f = fde(&e, c, CODE, 16, undef, sizeof undef);
	EXPECT(R_KIND(rule(f, 5)) == OUTERMOST);
	/* the extended and _sf forms: def_cfa_sf r7 -2 (x -8 = 16),
	 * offset_extended_sf r6 2 (x -8 = -16), GNU_args_size, advance_loc2
	 * and advance_loc4, def_cfa_offset_sf */
	static const uint8_t sf[] = {0x12, 7, 0x7e, 0x11, 6, 0x02, 0x2e, 8,
				     0x03, 10, 0, 0x0e, 24, 0x04, 10, 0, 0, 0, 0x0e, 32,
				     0x41, 0x13, 0x7b}; /* advance 1; def_cfa_offset_sf -5 (x -8 = 40) */
	size_t g = fde(&e, c, CODE + 64, 64, sf, sizeof sf);
	EXPECT(rule(g, 64) == RULE(STEP, 0, 16, -16));
	EXPECT(rule(g, 74) == RULE(STEP, 0, 24, -16));
	EXPECT(rule(g, 84) == RULE(STEP, 0, 32, -16));
	EXPECT(rule(g, 85) == RULE(STEP, 0, 40, -16));
	/* restore (0xc0 | reg): rbp back to the CIE's rule (unchanged) */
	static const uint8_t rest[] = {0x0e, 16, 0x86, 2, 0x44, 0xc6};
	size_t h = fde(&e, c, CODE + 128, 64, rest, sizeof rest);
	EXPECT(rule(h, 128) == RULE(STEP, 0, 16, -16));
	EXPECT(rule(h, 132) == RULE(STEP, 0, 16, 0));
}

TEST(refusals) {
	reset();
	struct em e = {EHF};
	size_t c = cie(&e, "zR", 1, INIT, sizeof INIT);
	const uint64_t bad = RULE(UNSUPPORTED, 0, 0, 0);
	/* a CFA given by an expression (PLT entries) */
	static const uint8_t expr[] = {0x0f, 2, 0x77, 8};
	EXPECT(rule(fde(&e, c, CODE, 16, expr, sizeof expr), 0) == bad);
	/* an opcode outside the reader's (DW_CFA_lo_user) */
	static const uint8_t lo_user[] = {0x1c};
	EXPECT(rule(fde(&e, c, CODE, 16, lo_user, sizeof lo_user), 0) == bad);
	/* the return address at CFA - 16, or kept in a register */
	static const uint8_t ra16[] = {0x90, 2};
	EXPECT(rule(fde(&e, c, CODE, 16, ra16, sizeof ra16), 0) == bad);
	static const uint8_t rareg[] = {0x09, 16, 3};
	EXPECT(rule(fde(&e, c, CODE, 16, rareg, sizeof rareg), 0) == bad);
	/* the CFA on another register (r3) */
	static const uint8_t r3[] = {0x0d, 3};
	EXPECT(rule(fde(&e, c, CODE, 16, r3, sizeof r3), 0) == bad);
	/* restore_state with nothing remembered; nine remember_states */
	static const uint8_t underflow[] = {0x0b};
	EXPECT(rule(fde(&e, c, CODE, 16, underflow, sizeof underflow), 0) == bad);
	static const uint8_t deep[] = {0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a};
	EXPECT(rule(fde(&e, c, CODE, 16, deep, sizeof deep), 0) == bad);
	static const uint8_t eight[] = {0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a};
	EXPECT(rule(fde(&e, c, CODE, 16, eight, sizeof eight), 0) == RULE(STEP, 0, 8, 0));
	/* an operand cut off by the FDE's end (a ULEB128 that never ends) */
	static const uint8_t cut[] = {0x0e, 0x80, 0x80, 0x80};
	size_t f = fde(&e, c, CODE, 16, cut, sizeof cut);
	for (size_t i = f + 4 + 4 + 4 + 4 + 1 + sizeof cut; i < f + 24; i++)
		img[i] = 0x80; /* the padding continues it to the FDE's end */
	EXPECT(rule(f, 0) == bad);
	/* a signal frame's CIE ("zRS"), a CIE of version 2, a CIE whose
	 * return address column is not 16 */
	size_t s = cie(&e, "zRS", 1, INIT, sizeof INIT);
	EXPECT(rule(fde(&e, s, CODE, 16, NULL, 0), 0) == bad);
	size_t v2 = cie(&e, "zR", 2, INIT, sizeof INIT);
	EXPECT(rule(fde(&e, v2, CODE, 16, NULL, 0), 0) == bad);
	size_t good = cie(&e, "zR", 1, INIT, sizeof INIT);
	size_t ok = fde(&e, good, CODE, 16, NULL, 0);
	EXPECT(rule(ok, 0) == RULE(STEP, 0, 8, 0));
	img[good + 4 + 4 + 1 + 3 + 2] = 15; /* the return address column */
	EXPECT(rule(ok, 0) == bad);
}

TEST(bounds) {
	reset();
	struct em e = {EHF};
	size_t c = cie(&e, "zR", 1, INIT, sizeof INIT);
	size_t f = fde(&e, c, CODE, 64, FUNC, sizeof FUNC);
	EXPECT(rule(f, 4) == RULE(STEP, 1, 16, -16));
	/* the object ends inside the FDE: nothing past it is read */
	span.hi = (uintptr_t)img + f + 12;
	EXPECT(rule(f, 4) == RULE(UNSUPPORTED, 0, 0, 0));
	span.hi = (uintptr_t)img + sizeof img;
	/* a length that runs past the object; the 64-bit length escape */
	uint32_t len, keep;
	memcpy(&keep, img + f, 4);
	len = IMG;
	memcpy(img + f, &len, 4);
	EXPECT(rule(f, 4) == RULE(UNSUPPORTED, 0, 0, 0));
	len = 0xffffffffu;
	memcpy(img + f, &len, 4);
	EXPECT(rule(f, 4) == RULE(UNSUPPORTED, 0, 0, 0));
	memcpy(img + f, &keep, 4);
	/* a CIE pointer before the object's start, and one of 0 (a CIE, not an FDE) */
	uint32_t cp;
	memcpy(&cp, img + f + 4, 4);
	uint32_t far = (uint32_t)(f + 4 + 64);
	memcpy(img + f + 4, &far, 4);
	EXPECT(rule(f, 4) == RULE(UNSUPPORTED, 0, 0, 0));
	uint32_t zero = 0;
	memcpy(img + f + 4, &zero, 4);
	EXPECT(rule(f, 4) == RULE(UNSUPPORTED, 0, 0, 0));
	memcpy(img + f + 4, &cp, 4);
	EXPECT(rule(f, 4) == RULE(STEP, 1, 16, -16));
	/* no FDE at all */
	EXPECT(mt_eh_fde_rule(&span, NULL, (uintptr_t)img + CODE) == 0);
}

/* .eh_frame_hdr: version 1, eh_frame_ptr pcrel sdata4, count udata4, the
 * table datarel sdata4: (start, FDE) pairs relative to the header. */
static void
hdr(size_t ehf, const size_t *starts, const size_t *fdes, int n) {
	struct em e = {0};
	e8(&e, 1);
	e8(&e, 0x1b);
	e8(&e, 0x03);
	e8(&e, 0x3b);
	e32(&e, (uint32_t)(ehf - e.n));
	e32(&e, (uint32_t)n);
	for (int i = 0; i < n; i++) {
		e32(&e, (uint32_t)starts[i]);
		e32(&e, (uint32_t)fdes[i]);
	}
}

TEST(search_table) {
	reset();
	struct em e = {EHF};
	size_t c = cie(&e, "zR", 1, INIT, sizeof INIT);
	static const uint8_t big[] = {0x0e, 48};
	size_t f1 = fde(&e, c, CODE, 64, FUNC, sizeof FUNC);
	size_t f2 = fde(&e, c, CODE + 128, 32, big, sizeof big);
	size_t f3 = fde(&e, c, CODE + 256, 16, NULL, 0);
	size_t starts[] = {CODE, CODE + 128, CODE + 256}, fdes[] = {f1, f2, f3};
	hdr(EHF, starts, fdes, 3);
	uintptr_t code = (uintptr_t)img + CODE;
	EXPECT(mt_eh_find_fde(&span, img, code - 1) == NULL); /* before the first */
	EXPECT(mt_eh_find_fde(&span, img, code) == img + f1);
	EXPECT(mt_eh_find_fde(&span, img, code + 127) == img + f1); /* past f1's end: its own check */
	EXPECT(mt_eh_find_fde(&span, img, code + 128) == img + f2);
	EXPECT(mt_eh_find_fde(&span, img, code + 300) == img + f3);
	EXPECT(mt_eh_rule(&span, img, code + 4) == RULE(STEP, 1, 16, -16));
	EXPECT(mt_eh_rule(&span, img, code + 130) == RULE(STEP, 0, 48, 0));
	EXPECT(mt_eh_rule(&span, img, code + 100) == 0); /* between f1 and f2 */
	EXPECT(mt_eh_rule(&span, img, code + 260) == RULE(STEP, 0, 8, 0));
	/* what the search refuses: another version, a table not datarel
	 * sdata4, a count the object cannot hold, an empty table */
	img[0] = 2;
	EXPECT(mt_eh_find_fde(&span, img, code) == NULL);
	img[0] = 1;
	img[3] = 0x1b;
	EXPECT(mt_eh_find_fde(&span, img, code) == NULL);
	img[3] = 0x3b;
	uint32_t n = IMG;
	memcpy(img + 8, &n, 4);
	EXPECT(mt_eh_find_fde(&span, img, code) == NULL);
	n = 0;
	memcpy(img + 8, &n, 4);
	EXPECT(mt_eh_find_fde(&span, img, code) == NULL);
	n = 3;
	memcpy(img + 8, &n, 4);
	EXPECT(mt_eh_find_fde(&span, img, code + 128) == img + f2);
}

int
main(void) {
	RUN(rows_of_a_function);
	RUN(outermost_and_other_opcodes);
	RUN(refusals);
	RUN(bounds);
	RUN(search_table);
	return TEST_DONE();
}
