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

#endif
