/*
 * pylines.h — the line of an instruction from a code object's line table,
 * for both table formats CPython has had since 3.10.  Capture layer, but
 * pure: the bytes in, the line out; no memory, no state.
 */
#ifndef MT_PYLINES_H
#define MT_PYLINES_H
#include <stdint.h>

/* 3.10 (PEP 626): t holds len bytes of (byte delta, signed line delta)
 * pairs, -128 meaning "no line"; first is co_firstlineno; addr the byte
 * offset of the instruction.  A line past the table's end is the last. */
int mt_py_line_pep626(const uint8_t *t, long len, int first, long addr);
/* 3.11+ (Objects/locations.md): the location table, entries of code units
 * of 2 bytes; addr the byte offset. */
int mt_py_line_locations(const uint8_t *t, long len, int first, long addr);

/* Where the last lookup in a table ended: the entry that held its address
 * (its index in the table, its first byte offset of code, the line before
 * its delta).  A lookup at that offset or later resumes there instead of
 * decoding the table from its start again: a module's top-level code is
 * one code object of thousands of instructions that runs once, top to
 * bottom, and decoding from the start for each new instruction made
 * `import torch` quadratic in module size (the decoder was 1.8% of its
 * samples).  Zeroed: nothing known yet. */
struct mt_py_lpos {
	long i, start;
	int line, valid;
};
/* As above, with a position (pos, NULL: none) that is read and updated;
 * the answer is the same as without. */
int mt_py_line_pep626_at(const uint8_t *t, long len, int first, long addr,
			 struct mt_py_lpos *pos);
int mt_py_line_locations_at(const uint8_t *t, long len, int first, long addr,
			    struct mt_py_lpos *pos);

#endif
