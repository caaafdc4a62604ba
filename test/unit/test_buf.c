/* test_buf — the shim's printf against libc's snprintf on the values the
 * writers print: 0, the extremes of each width, hex with and without the
 * prefix, literal runs before, between and after conversions, and a fixed
 * buffer that runs out (cut, never past its end). */
#include "../test.h"
#include "platform/buf.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static char out[512];

static const char *
fmt_shim(const char *f, ...) {
	struct mt_buf b;
	mt_buf_fixed(&b, out, sizeof out - 1);
	va_list ap;
	va_start(ap, f);
	mt_buf_vprintf(&b, f, ap);
	va_end(ap);
	out[b.len] = 0;
	return out;
}

#define SAME(fmt, ...)                                                         \
	do {                                                                   \
		char want[512];                                                \
		snprintf(want, sizeof want, fmt, __VA_ARGS__);                 \
		const char *got = fmt_shim(fmt, __VA_ARGS__);                  \
		EXPECT(!strcmp(got, want));                                    \
		if (strcmp(got, want))                                         \
			printf("  got [%s] want [%s]\n", got, want);           \
	} while (0)

TEST(numbers) {
	SAME("%u", 0u);
	SAME("%u", 4294967295u);
	SAME("%lu", (unsigned long)UINT64_MAX);
	SAME("%lu", 10000000000000000000ul);
	SAME("%d", -2147483647 - 1);
	SAME("%ld", (long)INT64_MIN);
	SAME("%ld", (long)INT64_MAX);
	SAME("%zu", (size_t)1234567);
	SAME("%x", 0u);
	SAME("%x", 0xdeadbeefu);
	SAME("%lx", (unsigned long)UINT64_MAX);
	SAME("%c%c", 'a', 'z');
}

TEST(literal_runs) {
	SAME("{\"type\":\"stack\",\"id\":%u,", 12u);
	SAME("%u%u%u", 1u, 22u, 333u);
	SAME("a%%b%s-%d-tail of text", "mid", 7);
	SAME("%s", "");
	SAME("only text, no conversion%s", "");
	/* %p is the shim's own: always 0x and hex, as the files write pcs */
	EXPECT(!strcmp(fmt_shim("[%p]", (void *)0x7f00dead0010), "[0x7f00dead0010]"));
	EXPECT(!strcmp(fmt_shim("%p", (void *)0), "0x0"));
}

TEST(fixed_buffer_runs_out) {
	char mem[10];
	struct mt_buf b;
	mt_buf_fixed(&b, mem, sizeof mem);
	mt_buf_printf(&b, "0123456789abcdef%lu", (unsigned long)UINT64_MAX);
	EXPECT(b.overflow && b.len <= sizeof mem);
	EXPECT(!memcmp(mem, "0123456789", b.len));
}

/* The writers' direct paths (mt_buf_hex in place, two digits at a time,
 * decimal from the pairs table, mt_buf_lit): every digit count of both
 * bases against snprintf, in a roomy buffer and in fixed buffers of every
 * size below the text, which must hold its first bytes, flagged as cut. */
TEST(direct_paths) {
	uint64_t vs[200];
	int nv = 0;
	vs[nv++] = 0;
	for (int k = 0; k < 64; k++) {
		vs[nv++] = 1ull << k;
		vs[nv++] = (1ull << k) - 1;
		vs[nv++] = (1ull << k) + 0x5a5a5a5a5a5a5a5aull % ((1ull << k) + 1);
	}
	uint64_t p10 = 1;
	for (int k = 0; k < 19 && nv < 200; k++, p10 *= 10) {
		vs[nv++] = p10 - 1 + (k == 0);
		if (nv < 200)
			vs[nv++] = p10;
	}
	int bad = 0;
	for (int i = 0; i < nv; i++) {
		char want[64], mem[64];
		snprintf(want, sizeof want, "[0x%" PRIx64 "|%" PRIu64 "|%" PRId64 "]", vs[i], vs[i],
			 (int64_t)vs[i]);
		for (size_t cap = 0; cap <= strlen(want) + 2; cap++) {
			struct mt_buf b;
			mt_buf_fixed(&b, mem, cap);
			mt_buf_lit(&b, "[");
			mt_buf_hex(&b, vs[i]);
			mt_buf_putc(&b, '|');
			mt_buf_u64(&b, vs[i]);
			mt_buf_lit(&b, "|");
			mt_buf_i64(&b, (int64_t)vs[i]);
			mt_buf_lit(&b, "]");
			size_t full = strlen(want);
			if (cap >= full)
				bad += b.len != full || memcmp(mem, want, full) || b.overflow;
			else
				bad += b.len > cap || !b.overflow || memcmp(mem, want, b.len);
		}
	}
	EXPECT(bad == 0);
	EXPECT(nv > 180);
}

int main(void) {
	RUN(numbers);
	RUN(direct_paths);
	RUN(literal_runs);
	RUN(fixed_buffer_runs_out);
	return TEST_DONE();
}
