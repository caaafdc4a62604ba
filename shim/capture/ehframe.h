/*
 * ehframe.h — call frame information (.eh_frame, .eh_frame_hdr) read into
 * the one rule a return address needs on x86-64: a pure reader of bytes
 * (no lookup of objects, no table, no state), which cfi.c's walker calls
 * on a miss and test_ehframe feeds hand-built CIEs and FDEs.
 *
 * A rule holds what x86-64 code nearly always does: the CFA is rsp or rbp
 * plus a constant, the return address is at CFA - 8, and rbp is either
 * saved at CFA + a constant or not touched.  Anything else (a CFA given by
 * a DWARF expression, as in PLT entries and signal trampolines; a return
 * address kept elsewhere; a CIE with a signal frame's "S"; an opcode or
 * encoding this reader does not know; bytes outside the object) gives the
 * rule UNSUPPORTED: the reader never guesses.
 *
 * One return address's rule, a word:
 *   bits 0-31  cfa_off: CFA = (cfa_rbp ? rbp : rsp) + cfa_off
 *   bits 32-47 rbp_off: rbp saved at CFA + rbp_off; 0: rbp unchanged
 *   bit 48     cfa_rbp
 *   bits 56-63 kind: UNSUPPORTED, STEP, OUTERMOST (return address undefined)
 * UNSUPPORTED is the word 0.
 *
 * Rules: never calls malloc, takes no lock, keeps no state; every byte read
 * lies inside the object's span, whatever the offsets in the data say.
 * Async-signal-safe.
 */
#ifndef MT_EHFRAME_H
#define MT_EHFRAME_H
#include <stdint.h>

enum { UNSUPPORTED = 0, STEP = 1, OUTERMOST = 2 };

#define RULE(kind, cfa_rbp, cfa_off, rbp_off)                                  \
	((uint64_t)(kind) << 56 | (uint64_t)(cfa_rbp) << 48 |                  \
	 (uint64_t)(uint16_t)(rbp_off) << 32 | (uint64_t)(uint32_t)(cfa_off))
#define R_KIND(w) ((unsigned)((w) >> 56))
#define R_CFA_RBP(w) ((w) >> 48 & 1)
#define R_CFA_OFF(w) ((intptr_t)(int32_t)(uint32_t)(w))
#define R_RBP_OFF(w) ((intptr_t)(int16_t)(uint16_t)((w) >> 32))

/* A loaded object's mapped range (_dl_find_object's): lo <= byte <= hi. */
struct mt_span {
	uintptr_t lo, hi;
};

/* The rule for target (the address whose row applies: a frame's pc when
 * innermost, pc - 1 for a caller), from the object's .eh_frame_hdr. */
uint64_t mt_eh_rule(const struct mt_span *o, const uint8_t *eh_frame_hdr, uintptr_t target);
/* The FDE that the .eh_frame_hdr search table gives for pc (the last entry
 * starting at or before it; NULL: none, or a table this reader does not
 * read).  Whether the FDE covers pc is mt_eh_fde_rule's to check. */
const uint8_t *mt_eh_find_fde(const struct mt_span *o, const uint8_t *hdr, uintptr_t pc);
/* The rule for target from the FDE at fde (and the CIE it points to):
 * UNSUPPORTED when the FDE does not cover target or its CFI falls outside
 * the rule's forms. */
uint64_t mt_eh_fde_rule(const struct mt_span *o, const uint8_t *fde, uintptr_t target);

#endif
