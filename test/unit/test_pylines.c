/* test_pylines — CPython's two line-table formats, decoded by hand-built
 * tables whose answers are worked out in the comments, and the u64 map the
 * Python tables use (collisions, growth, backward-shift deletion). */
#include "../test.h"
#include "capture/pylines.h"
#include "state/map64.h"
#include <stdint.h>

/* 3.10 (PEP 626): first line 10; pairs (byte delta, line delta):
 *   (6, 0)    bytes [0, 6)   line 10
 *   (4, +1)   bytes [6, 10)  line 11
 *   (2, -128) bytes [10, 12) no line: 11 stays
 *   (8, +2)   bytes [12, 20) line 13
 *   (0, +5)   an empty range (a line change alone): 18 from byte 20 on */
TEST(pep626) {
	const uint8_t t[] = {6, 0, 4, 1, 2, (uint8_t)-128, 8, 2, 0, 5};
	long n = sizeof t;
	EXPECT(mt_py_line_pep626(t, n, 10, 0) == 10);
	EXPECT(mt_py_line_pep626(t, n, 10, 5) == 10);
	EXPECT(mt_py_line_pep626(t, n, 10, 6) == 11);
	EXPECT(mt_py_line_pep626(t, n, 10, 9) == 11);
	EXPECT(mt_py_line_pep626(t, n, 10, 10) == 11);
	EXPECT(mt_py_line_pep626(t, n, 10, 12) == 13);
	EXPECT(mt_py_line_pep626(t, n, 10, 19) == 13);
	EXPECT(mt_py_line_pep626(t, n, 10, 400) == 18); /* past the end: the last */
	EXPECT(mt_py_line_pep626(t, 0, 10, 0) == 10);   /* empty table: first */
	EXPECT(mt_py_line_pep626(t, 1, 10, 0) == 10);   /* a torn pair is ignored */
}

#define ENTRY(form, units) (uint8_t)(0x80 | (form) << 3 | ((units) - 1))

/* 3.11+ (Objects/locations.md), first line 5; code units of 2 bytes:
 *   form 13, 2 units, varint +3 (zigzag 6)        bytes [0, 4)   line 8
 *   form 11 (+1), 1 unit, two column bytes         bytes [4, 6)   line 9
 *   form 0 (short, +0), 3 units, one column byte   bytes [6, 12)  line 9
 *   form 13, 1 unit, varint -2 (zigzag 5)          bytes [12, 14) line 7
 *   form 15 (no location), 1 unit                  bytes [14, 16) line 7
 *   form 14 (long), 1 unit, varint +40 in two bytes (zigzag 80: 16|64, 1),
 *     then end line, column and end column varints bytes [16, 18) line 47
 *   form 12 (+2), 8 units                          bytes [18, 34) line 49 */
#define LOCATIONS                                                              \
	ENTRY(13, 2), 6,                                                       \
	ENTRY(11, 1), 4, 9,                                                    \
	ENTRY(0, 3), 1,                                                        \
	ENTRY(13, 1), 5,                                                       \
	ENTRY(15, 1),                                                          \
	ENTRY(14, 1), 16 | 64, 1, 0, 3, 7,                                     \
	ENTRY(12, 8), 0, 0
TEST(locations) {
	const uint8_t t[] = {LOCATIONS};
	long n = sizeof t;
	EXPECT(mt_py_line_locations(t, n, 5, 0) == 8);
	EXPECT(mt_py_line_locations(t, n, 5, 3) == 8);
	EXPECT(mt_py_line_locations(t, n, 5, 4) == 9);
	EXPECT(mt_py_line_locations(t, n, 5, 6) == 9);
	EXPECT(mt_py_line_locations(t, n, 5, 11) == 9);
	EXPECT(mt_py_line_locations(t, n, 5, 12) == 7);
	EXPECT(mt_py_line_locations(t, n, 5, 14) == 7);
	EXPECT(mt_py_line_locations(t, n, 5, 16) == 47);
	EXPECT(mt_py_line_locations(t, n, 5, 18) == 49);
	EXPECT(mt_py_line_locations(t, n, 5, 33) == 49);
	EXPECT(mt_py_line_locations(t, n, 5, 1000) == 49);
	EXPECT(mt_py_line_locations(t, 0, 5, 0) == 5);
	/* a table cut inside a varint stops there, without reading past */
	EXPECT(mt_py_line_locations(t, 1, 5, 0) == 5);
}

/* The resumable lookups give the stateless answer for every address, in
 * order, backwards and at random, carrying one position throughout (a
 * position past the address must start again from the table's top). */
TEST(resume) {
	const uint8_t p[] = {6, 0, 4, 1, 2, (uint8_t)-128, 8, 2, 0, 5, 3, (uint8_t)-3};
	const uint8_t l[] = {LOCATIONS, ENTRY(13, 3), 9}; /* one more: -4 */
	int bad = 0;
	for (int order = 0; order < 3; order++) {
		struct mt_py_lpos pp = {0}, lp = {0};
		uint32_t r = 12345;
		for (long k = 0; k < 400; k++) {
			long a = order == 0 ? k % 50 : order == 1 ? 49 - k % 50 : (r = r * 1103515245 + 12345) >> 16 & 63;
			bad += mt_py_line_pep626_at(p, sizeof p, 10, a, &pp) != mt_py_line_pep626(p, sizeof p, 10, a);
			bad += mt_py_line_locations_at(l, sizeof l, 5, a, &lp) !=
			       mt_py_line_locations(l, sizeof l, 5, a);
		}
	}
	EXPECT(bad == 0);
	/* it does resume: a later address is answered from the position */
	struct mt_py_lpos pos = {0};
	EXPECT(mt_py_line_locations_at(l, sizeof l, 5, 16, &pos) == 47);
	EXPECT(pos.valid && pos.start == 16 && pos.line == 7);
	EXPECT(mt_py_line_locations_at(l, sizeof l, 5, 18, &pos) == 49 && pos.start == 18);
}

TEST(map64) {
	struct mt_map64 m = {0};
	EXPECT(mt_map64_get(&m, 42) == 0);
	EXPECT(mt_map64_del(&m, 42) == 0);
	/* 5000 keys: several doublings from 1024 slots */
	for (uint64_t k = 1; k <= 5000; k++)
		EXPECT(mt_map64_put(&m, k * 0x10000, (uint32_t)k) == 0);
	EXPECT(m.used == 5000 && m.mask + 1 >= 10000);
	int all = 1;
	for (uint64_t k = 1; k <= 5000; k++)
		all &= mt_map64_get(&m, k * 0x10000) == (uint32_t)k;
	EXPECT(all);
	/* put on a present key replaces; insert adds a second slot */
	EXPECT(mt_map64_put(&m, 0x10000, 77) == 0 && mt_map64_get(&m, 0x10000) == 77);
	EXPECT(m.used == 5000);
	/* delete every other key: the rest stay reachable (backward shift) */
	for (uint64_t k = 2; k <= 5000; k += 2)
		EXPECT(mt_map64_del(&m, k * 0x10000) == 1);
	all = 1;
	for (uint64_t k = 1; k <= 5000; k++)
		all &= mt_map64_get(&m, k * 0x10000) == (k % 2 ? (k == 1 ? 77u : (uint32_t)k) : 0u);
	EXPECT(all);
	EXPECT(m.used == 2500);
	EXPECT(mt_map64_insert(&m, 3 * 0x10000, 9) == 0 && m.used == 2501);
	EXPECT(m.bytes == (m.mask + 1) * (sizeof *m.k + sizeof *m.v));
}

int
main(void) {
	RUN(pep626);
	RUN(locations);
	RUN(resume);
	RUN(map64);
	return TEST_DONE();
}
