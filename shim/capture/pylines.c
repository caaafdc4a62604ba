/*
 * pylines.c — CPython's line tables (pylines.h): pure functions over the
 * table's bytes, unit-tested in test/unit/test_pylines.c.
 */
#include "capture/pylines.h"
#include <stddef.h>

static int
varint(const uint8_t *t, long len, long *i) {
	unsigned v = 0, shift = 0;
	while (*i < len) {
		uint8_t b = t[(*i)++];
		v |= (unsigned)(b & 63) << shift;
		shift += 6;
		if (!(b & 64) || shift > 28)
			break;
	}
	return (int)v;
}

/* The line of byte offset addr of the bytecode: PEP 626's table (3.10:
 * pairs of unsigned byte delta, signed line delta; -128 = no line). */
int
mt_py_line_pep626_at(const uint8_t *t, long len, int first, long addr,
		     struct mt_py_lpos *pos) {
	int line = first;
	long end = 0, i = 0;
	if (pos && pos->valid && addr >= pos->start) {
		i = pos->i;
		end = pos->start;
		line = pos->line;
	}
	for (; i + 1 < len; i += 2) {
		long start = end;
		int before = line;
		end += t[i];
		int ld = (int8_t)t[i + 1];
		if (ld != -128)
			line += ld;
		if (addr >= start && addr < end) {
			if (pos)
				*pos = (struct mt_py_lpos){i, start, before, 1};
			return line;
		}
	}
	return line;
}

/* The location table of 3.11+ (Objects/locations.md): an entry starts
 * with a byte whose top bit is set; bits 3-6 the form, 0-2 the length in
 * code units minus one; forms 13 and 14 start with a signed varint line
 * delta, 10-12 mean +0, +1, +2, the rest +0 (15: no location). */
int
mt_py_line_locations_at(const uint8_t *t, long len, int first, long addr,
			struct mt_py_lpos *pos) {
	int line = first;
	long end = 0, i = 0;
	if (pos && pos->valid && addr >= pos->start) {
		i = pos->i;
		end = pos->start;
		line = pos->line;
	}
	while (i < len) {
		uint8_t b = t[i];
		int form = b >> 3 & 15, before = line;
		long units = (b & 7) + 1;
		if (form == 13 || form == 14) {
			long j = i + 1;
			int v = varint(t, len, &j);
			line += v & 1 ? -(v >> 1) : v >> 1;
		} else if (form == 11 || form == 12) {
			line += form - 10;
		}
		long start = end;
		end += units * 2;
		if (addr >= start && addr < end) {
			if (pos)
				*pos = (struct mt_py_lpos){i, start, before, 1};
			return line;
		}
		do
			i++;
		while (i < len && !(t[i] & 128));
	}
	return line;
}

int
mt_py_line_pep626(const uint8_t *t, long len, int first, long addr) {
	return mt_py_line_pep626_at(t, len, first, addr, NULL);
}

int
mt_py_line_locations(const uint8_t *t, long len, int first, long addr) {
	return mt_py_line_locations_at(t, len, first, addr, NULL);
}
