/* antest_core — the analysis command's pure cores: the leak fit and its
 * criteria over hand-made series, the teardown cut, the JSON parser's
 * edge cases and escapes, and delta replay (a file written here, read by
 * the reader, every snapshot's call sites as the shim meant them). */
#include "../test.h"
#include "read/json.h"
#include "model/model.h"
#include "answer/stats.h"
#include "base/util.h"
#include "answer/sites.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The command is a one-shot process that leaves its model to exit (as
 * `make check`'s ASan runs of it do: detect_leaks=0). */
const char *__asan_default_options(void);
const char *
__asan_default_options(void) {
	return "detect_leaks=0";
}

#define KIB 1024.0
#define N 40

static double x[N];

static void
hours(void) {
	for (int i = 0; i < N; i++)
		x[i] = i / 60.0; /* a point a minute */
}

static int
fit(const double *y, size_t n, struct leak_fit *f) {
	return leak_fit(x, y, n, 64 * KIB, f);
}

TEST(leak_steady) { /* 16 KiB a minute with noise: a leak, at its rate */
	double y[N];
	hours();
	for (int i = 0; i < N; i++)
		y[i] = 1e6 + i * 16 * KIB + (i % 3) * 2000;
	struct leak_fit f;
	EXPECT(fit(y, N, &f));
	EXPECT(fabs(f.slope - 16 * KIB * 60) < 0.05 * 16 * KIB * 60);
	EXPECT(f.tau > 0.9 && f.w0 == 0);
}

TEST(churn_is_not_a_leak) { /* up and down around a level */
	double y[N];
	hours();
	for (int i = 0; i < N; i++)
		y[i] = 1e6 + ((i * 7919) % 13) * 100 * KIB;
	struct leak_fit f;
	EXPECT(!fit(y, N, &f));
}

TEST(cache_that_fills_is_not_a_leak) { /* grows, then flat for the second half */
	double y[N];
	hours();
	for (int i = 0; i < N; i++)
		y[i] = (i < N / 2 ? i : N / 2) * 64 * KIB;
	struct leak_fit f;
	EXPECT(!fit(y, N, &f));
}

TEST(one_step_is_not_a_leak) { /* one jump (an arena taken at start-up) */
	double y[N];
	hours();
	for (int i = 0; i < N; i++)
		y[i] = i < 5 ? 0 : 8 << 20;
	struct leak_fit f;
	EXPECT(!fit(y, N, &f));
}

TEST(too_small_is_not_a_leak) { /* steady, but 40 KiB in all */
	double y[N];
	hours();
	for (int i = 0; i < N; i++)
		y[i] = i * 1024.0;
	struct leak_fit f;
	EXPECT(!fit(y, N, &f));
}

TEST(late_leak_is_judged_where_it_grows) { /* flat for 3/4, then 32 KiB/point */
	double y[N];
	hours();
	for (int i = 0; i < N; i++)
		y[i] = i < 30 ? 5e6 : 5e6 + (i - 29) * 32 * KIB;
	struct leak_fit f;
	EXPECT(fit(y, N, &f));
	EXPECT(f.w0 == 30); /* the last quarter */
	EXPECT(fabs(f.slope - 32 * KIB * 60) < 0.05 * 32 * KIB * 60);
}

TEST(few_points) {
	double y[3] = {0, 1e6, 2e6};
	struct leak_fit f;
	hours();
	EXPECT(!fit(y, 2, &f)); /* two points judge nothing */
}

TEST(teardown) {
	/* rises to 100, stays, then an exit path frees down to 10 */
	double y[] = {10, 40, 70, 100, 100, 100, 60, 30, 10};
	EXPECT(teardown_end(y, 0, 9) == 6); /* 60, 30, 10: the way out */
	/* ... and a fall of 5% of the peak before them goes too */
	double w[] = {10, 40, 70, 100, 100, 100, 95, 60, 30, 10};
	EXPECT(teardown_end(w, 0, 10) == 6);
	/* a trailing fall that stays above 4/5 but lost >= 5% is teardown too */
	double z[] = {10, 50, 100, 98, 96, 93, 90, 85};
	EXPECT(teardown_end(z, 0, 8) == 3);
	double flat[] = {5, 5, 5};
	EXPECT(teardown_end(flat, 0, 3) == 3);
	/* an early spike, then the run goes on (growing): no teardown (the
	 * old rule cut everything below 4/5 of the spike) */
	double spike[] = {10, 20, 100, 30, 40, 50, 60};
	EXPECT(teardown_end(spike, 0, 7) == 7);
	/* the way out, then a level (a snapshot after the exit's): still
	 * teardown */
	double level[] = {10, 40, 70, 100, 10, 10};
	EXPECT(teardown_end(level, 0, 6) == 4);
	/* a spike, more of the run, then a real way out */
	double both[] = {10, 100, 30, 40, 50, 35, 20};
	EXPECT(teardown_end(both, 0, 7) == 5);
}

static struct jv *
parse(struct jdoc *d, const char *text, const char **err) {
	static char buf[4096];
	size_t n = strlen(text);
	memcpy(buf, text, n + 1);
	size_t col = 0;
	return json_parse(d, buf, n, err, &col);
}

TEST(json) {
	struct jdoc d = {0};
	const char *err = NULL;
	struct jv *r = parse(&d, "{\"a\":1,\"b\":[true,false,null],\"c\":\"x\\n\\u00e9\\ud83d\\ude00\"}", &err);
	EXPECT(r && r->type == J_OBJ);
	EXPECT(json_int(&d, r, "a", -1) == 1);
	struct jv *b = json_get(&d, r, "b");
	EXPECT(b && b->type == J_ARR && b->len == 3);
	const char *c = json_str(&d, r, "c");
	EXPECT(c && !strcmp(c, "x\n\xc3\xa9\xf0\x9f\x98\x80")); /* é and U+1F600 */
	r = parse(&d, "{\"big\":9007199254740993,\"neg\":-12,\"f\":1.5e3,\"h\":\"0x1f\"}", &err);
	EXPECT(r && json_int(&d, r, "neg", 0) == -12);
	EXPECT(json_int(&d, r, "big", 0) == 9007199254740993LL); /* exact past 2^53 */
	EXPECT(json_num(&d, r, "f", 0) == 1500.0);
	uint64_t h = 0;
	EXPECT(json_hex(json_get(&d, r, "h"), &h) && h == 0x1f);
	/* what must be refused, each with a reason */
	const char *bad[] = {"{", "{\"a\":}", "[1,]", "{\"a\" 1}", "\"\\x\"", "tru", "01",
			     "{\"a\":1}x", "\"\\u12\"", "\"abc", ""};
	/* a lone surrogate and \u0000 become U+FFFD: strings stay UTF-8 and
	 * NUL-free (a lone surrogate was written as ED A0 80 before) */
	r = parse(&d, "[\"a\\ud800b\", \"\\u0000\", \"\\udc00\"]", &err);
	EXPECT(r && !strcmp(json_child(&d, r)->s, "a\xef\xbf\xbd" "b"));
	EXPECT(r && !strcmp(json_next(&d, json_child(&d, r))->s, "\xef\xbf\xbd"));
	EXPECT(r && !strcmp(json_next(&d, json_next(&d, json_child(&d, r)))->s, "\xef\xbf\xbd"));
	/* 1e400 is a number to the parser (inf); the reader refuses it where
	 * a field needs one (test_badinput) */
	r = parse(&d, "1e400", &err);
	EXPECT(r && r->type == J_NUM && isinf(r->d));
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err = NULL;
		r = parse(&d, bad[i], &err);
		if (r || !err)
			printf("  accepted: %s\n", bad[i]);
		EXPECT(!r && err);
	}
	/* nesting: 64 levels parse, 65 do not */
	char deep[200];
	memset(deep, '[', 64);
	memset(deep + 64, ']', 64);
	deep[128] = 0;
	EXPECT(parse(&d, deep, &err) != NULL);
	memset(deep, '[', 65);
	memset(deep + 65, ']', 65);
	deep[130] = 0;
	EXPECT(parse(&d, deep, &err) == NULL);
	json_free(&d);
}

/* Delta replay: snapshot 0 lists every site; 1 lists only what changed
 * (site 5 grew, site 6 appeared); 2 is full again without site 6 (gone);
 * 3 is a delta that changes nothing. */
TEST(replay) {
	char path[] = "/tmp/antest_replayXXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "{\"type\":\"header\",\"version\":2,\"pid\":1,\"ppid\":0,\"rank\":null,"
		   "\"local_rank\":null,\"world_size\":null,\"host\":\"h\",\"exe\":\"/x\",\"argv\":[\"x\"],"
		   "\"start_wall_ns\":0,\"start_mono_ns\":0,\"sample_bytes\":0}\n");
	fprintf(f, "{\"type\":\"stack\",\"id\":5,\"pcs\":[\"0x10\"]}\n");
	fprintf(f, "{\"type\":\"stack\",\"id\":6,\"pcs\":[\"0x20\"]}\n");
	const char *snaps[] = {
		"\"callsites_mode\":\"full\",\"callsites\":[{\"stack\":5,\"kind\":\"heap\",\"live_bytes\":100,"
		"\"live_count\":1,\"allocs\":1,\"alloc_bytes\":100,\"frees\":0,\"peak_bytes\":100}]",
		"\"callsites_mode\":\"delta\",\"callsites\":[{\"stack\":5,\"kind\":\"heap\",\"live_bytes\":300,"
		"\"live_count\":2,\"allocs\":2,\"alloc_bytes\":300,\"frees\":0,\"peak_bytes\":300},"
		"{\"stack\":6,\"kind\":\"mmap\",\"live_bytes\":4096,\"live_count\":1,\"allocs\":1,"
		"\"alloc_bytes\":4096,\"frees\":0,\"peak_bytes\":4096}]",
		"\"callsites_mode\":\"full\",\"callsites\":[{\"stack\":5,\"kind\":\"heap\",\"live_bytes\":300,"
		"\"live_count\":2,\"allocs\":2,\"alloc_bytes\":300,\"frees\":0,\"peak_bytes\":300}]",
		"\"callsites_mode\":\"delta\",\"callsites\":[]",
	};
	for (int i = 0; i < 4; i++)
		fprintf(f, "{\"type\":\"snapshot\",\"seq\":%d,\"reason\":\"every\",\"elapsed_ms\":%d,%s}\n",
			i, i * 10, snaps[i]);
	fclose(f);
	struct run r;
	char *paths[] = {path};
	run_load(&r, paths, 1);
	EXPECT(r.nfiles == 1 && r.files[0].nsnaps == 4);
	struct mfile *m = &r.files[0];
	int64_t want5[] = {100, 300, 300, 300}, want6[] = {-1, 4096, -1, -1};
	for (int i = 0; i < 4 && m->nsnaps == 4; i++) {
		size_t n;
		struct site *v = snap_sites(m, &m->snaps[i], &n);
		int64_t got5 = -1, got6 = -1;
		for (size_t k = 0; k < n; k++) {
			long long id = stack_file_id(m, v[k].stack);
			if (id == 5 && v[k].kind == K_HEAP)
				got5 = v[k].live_bytes;
			if (id == 6 && v[k].kind == K_MMAP)
				got6 = v[k].live_bytes;
		}
		if (got5 != want5[i] || got6 != want6[i])
			printf("  snapshot %d: site 5 %lld (want %lld), site 6 %lld (want %lld)\n", i,
			       (long long)got5, (long long)want5[i], (long long)got6, (long long)want6[i]);
		EXPECT(got5 == want5[i] && got6 == want6[i]);
		free(v);
	}
	/* replay out of order: the 2nd snapshot after the 4th */
	size_t n;
	struct site *v = snap_sites(m, &m->snaps[1], &n);
	EXPECT(n == 2);
	free(v);
	unlink(path);
}

/* What a terminal gets: control characters and bytes that are not UTF-8
 * as \xNN, characters whole, also when a write cuts one in two. */
static void
escaped(const char *in, size_t n, size_t cut, const char *want) {
	struct textesc t = {0};
	struct sb o = {0};
	text_escape(&t, in, cut, &o);
	text_escape(&t, in + cut, n - cut, &o);
	int ok = o.p && !strcmp(o.p, want);
	if (!ok)
		printf("  cut at %zu: got \"%s\", want \"%s\"\n", cut, o.p ? o.p : "", want);
	EXPECT(ok);
	sb_free(&o);
}

TEST(escape_for_terminal) {
	const char *kana = "\xe3\x83\x87\xe3\x83\xbc"; /* two 3-byte characters */
	for (size_t cut = 0; cut <= 6; cut++)
		escaped(kana, 6, cut, kana);
	const char *bad = "a\xff\xe3\x83" "b\x1b[1m\r\n\xed\xa0\x80\xf0\x9f\x98\x80";
	const char *want = "a\\xff\\xe3\\x83b\\x1b[1m\\x0d\n\\xed\\xa0\\x80\xf0\x9f\x98\x80";
	for (size_t cut = 0; cut <= strlen(bad); cut++)
		escaped(bad, strlen(bad), cut, want);
}

/* C++ names lose their parameter lists in a report's "where": cc1's rows
 * all read "ggc_internal_alloc(unsigned long, void (*..." */
TEST(short_names) {
	static const char *const cases[][2] = {
		{"ggc_internal_alloc(unsigned long, void (*)(void*), unsigned long, unsigned long)",
		 "ggc_internal_alloc"},
		{"Foo::operator()(int) const", "Foo::operator()"},
		{"std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>("
		 "__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)",
		 "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>"},
		{"(anonymous namespace)::grow(int)", "(anonymous namespace)::grow"},
		{"main", "main"},
		{"foo()", "foo"},
		{"(broken", "(broken"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char buf[512];
		const char *got = site_short_func(cases[i][0], buf, sizeof buf);
		if (strcmp(got, cases[i][1]))
			printf("  %s -> %s (want %s)\n", cases[i][0], got, cases[i][1]);
		EXPECT(!strcmp(got, cases[i][1]));
	}
}

int
main(void) {
	RUN(leak_steady);
	RUN(churn_is_not_a_leak);
	RUN(cache_that_fills_is_not_a_leak);
	RUN(one_step_is_not_a_leak);
	RUN(too_small_is_not_a_leak);
	RUN(late_leak_is_judged_where_it_grows);
	RUN(few_points);
	RUN(teardown);
	RUN(json);
	RUN(replay);
	RUN(escape_for_terminal);
	RUN(short_names);
	return TEST_DONE();
}
