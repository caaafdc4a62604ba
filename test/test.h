/* test.h — the unit-test harness: TEST, EXPECT, and a closing
 * "N passed, N failed" line; the exit status is non-zero on any failure. */
#ifndef MT_TEST_H
#define MT_TEST_H
#include <stdio.h>
static int t_pass, t_fail, t_cur_failed;
#define TEST(name) static void name(void)
#define RUN(name)                                                              \
	do {                                                                   \
		t_cur_failed = 0;                                              \
		name();                                                        \
		if (t_cur_failed)                                              \
			t_fail++;                                              \
		else                                                           \
			t_pass++;                                              \
		printf("%s %s\n", t_cur_failed ? "FAIL" : "ok  ", #name);      \
	} while (0)
#define EXPECT(c)                                                              \
	do {                                                                   \
		if (!(c)) {                                                    \
			printf("  %s:%d: expected %s\n", __FILE__, __LINE__,   \
			       #c);                                            \
			t_cur_failed = 1;                                      \
		}                                                              \
	} while (0)
#define TEST_DONE()                                                            \
	(printf("%d passed, %d failed\n", t_pass, t_fail), t_fail ? 1 : 0)
#endif
