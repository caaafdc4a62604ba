/* antest_answer.c — the answer core (analysis/answer/answer.h) on small
 * files written here: the growth window (steps, start-up, teardown), rows
 * (sites that print alike are one), growth on rows, spikes, the moment
 * (the peak by default, FILE@N wins).  One test per answer. */
#include "../test.h"
#include "answer/answer.h"
#include "base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A file of four stacks (1 and 2 have the same frame, so they print
 * alike: two sites of one row) and the snapshots given as JSON
 * fragments, with a "step" mark where steps[i] >= 0. */
static char path[64];

/* The heap total of a snapshot: its sites' live bytes summed. */
static long long
heap_of(const char *sites) {
	long long t = 0;
	for (const char *p = sites; (p = strstr(p, "\"live_bytes\":")); p++)
		t += atoll(p + 13);
	return t;
}

static struct mfile *
load(const char *const *snaps, int n, const int *steps, const int *ms) {
	strcpy(path, "/tmp/antest_answerXXXXXX");
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "{\"type\":\"header\",\"version\":2,\"pid\":1,\"ppid\":0,\"rank\":null,"
		   "\"local_rank\":null,\"world_size\":null,\"host\":\"h\",\"exe\":\"/x\",\"argv\":[\"x\"],"
		   "\"start_wall_ns\":0,\"start_mono_ns\":0,\"sample_bytes\":0}\n");
	/* stacks 1 and 2: the same pc (two sites one row); 3, 4: their own */
	fprintf(f, "{\"type\":\"stack\",\"id\":1,\"pcs\":[\"0x1000\"]}\n");
	fprintf(f, "{\"type\":\"stack\",\"id\":2,\"pcs\":[\"0x1000\"]}\n");
	fprintf(f, "{\"type\":\"stack\",\"id\":3,\"pcs\":[\"0x3000\"]}\n");
	fprintf(f, "{\"type\":\"stack\",\"id\":4,\"pcs\":[\"0x4000\"]}\n");
	for (int i = 0; i < n; i++) {
		fprintf(f, "{\"type\":\"snapshot\",\"seq\":%d,\"reason\":\"every\",\"elapsed_ms\":%d,", i,
			ms ? ms[i] : i * 1000);
		if (steps && steps[i] >= 0)
			fprintf(f, "\"marks\":{\"step\":%d},", steps[i]);
		fprintf(f, "\"heap\":{\"live_bytes\":%lld},\"callsites_mode\":\"full\",\"callsites\":[%s]}\n",
			heap_of(snaps[i]), snaps[i]);
	}
	fclose(f);
	static struct run runs[16]; /* kept: every test's model stays reachable */
	static int nruns;
	struct run *r = &runs[nruns++ % 16];
	char *paths[] = {path};
	run_load(r, paths, 1);
	unlink(path);
	return &r->files[0];
}

static char *
site(int stack, long long live, long long peak, long long at_peak) {
	static char buf[64][256];
	static int k;
	char *b = buf[k++ % 64];
	snprintf(b, 256,
		 "{\"stack\":%d,\"kind\":\"heap\",\"live_bytes\":%lld,\"live_count\":1,\"allocs\":1,"
		 "\"alloc_bytes\":%lld,\"frees\":0,\"peak_bytes\":%lld,\"at_peak_bytes\":%lld}",
		 stack, live, live, peak, at_peak);
	return b;
}

/* N snapshots: stacks 1 and 2 leak 64 KiB a step each (one row, 128 KiB a
 * step), stack 3 churns, stack 4 held 32 MiB at step 3 only (a spike:
 * peak 32 MiB, at the process peak 0). */
#define N 12
static const char *snaps[N];

static void
make(void) {
	static char text[N][1024];
	for (int i = 0; i < N; i++) {
		long long leak = (long long)i * 65536;
		snprintf(text[i], sizeof text[i], "%s,%s,%s,%s", site(1, leak, leak, leak),
			 site(2, leak, leak, leak), site(3, i % 2 ? 1 << 20 : 0, 1 << 20, 0),
			 site(4, i == 3 ? 32 << 20 : 0, 32 << 20, 0));
		snaps[i] = text[i];
	}
}

TEST(window_by_steps) {
	/* steps 0..9 after two start-up snapshots without steps; teardown
	 * after the last step (the last step repeated) */
	int steps[N] = {-1, -1, 0, 1, 2, 3, 4, 5, 6, 7, 9, 9};
	struct mfile *f = load(snaps, N, steps, NULL);
	struct window w;
	answer_window(f, 0.2, &w);
	EXPECT(w.by_step && w.mark && !strcmp(w.mark, "step"));
	/* 20% of steps 0-9: from step 1.8, so the snapshot at step 2 */
	EXPECT(w.lo == 4 && w.step_lo == 2);
	EXPECT(w.end == 11 && w.step_hi == 9); /* the first at the last step */
	EXPECT(w.warm == 4 && w.tear == 1);
	struct window c;
	EXPECT(answer_window_steps(f, &w, 3, 6, &c) && c.lo == 5 && c.end == 9 && c.step_lo == 3 &&
	       c.step_hi == 6);
	/* steps no snapshot fell on: the snapshots around them (3.5 -> 3, 8 -> 9) */
	EXPECT(answer_window_steps(f, &w, 3.5, 8, &c) && c.lo == 5 && c.end == 11 && c.step_lo == 3 &&
	       c.step_hi == 9);
}

TEST(window_by_time) {
	int ms[N];
	for (int i = 0; i < N; i++)
		ms[i] = i * 1000;
	struct mfile *f = load(snaps, N, NULL, ms);
	struct window w;
	answer_window(f, 0.25, &w);
	EXPECT(!w.by_step && !w.mark);
	EXPECT(w.lo == 3); /* 25% of 11 s: from 2.75 s */
	EXPECT(w.end == N); /* no fall at the end: no teardown */
}

TEST(rows_group_sites_that_print_alike) {
	struct mfile *f = load(snaps, N, NULL, NULL);
	struct ask a = {.kind = -1, .snapshot = SNAP_LAST, .warmup = 0.2};
	const struct snap *s;
	int at_peak;
	size_t nr;
	struct row *r = answer_rows_at(f, &a, &s, &at_peak, &nr);
	EXPECT(!at_peak && s == &f->snaps[N - 1]);
	/* stacks 1 and 2 share a name: one row of two sites, both summed */
	EXPECT(nr >= 1 && r[0].nsites == 2 && r[0].live == 2 * 11 * 65536);
	EXPECT(nr >= 1 && r[0].peak == 11 * 65536); /* the largest own peak of its sites */
	rows_free(r, nr);
	a.apart = 1; /* --stacks: every site its own row */
	r = answer_rows_at(f, &a, &s, &at_peak, &nr);
	int apart = 0;
	for (size_t i = 0; i < nr; i++)
		apart += r[i].nsites == 1 && r[i].live == 11 * 65536;
	EXPECT(apart == 2);
	rows_free(r, nr);
}

TEST(moment_is_the_peak_unless_asked) {
	struct mfile *f = load(snaps, N, NULL, NULL);
	struct ask a = {.kind = -1, .snapshot = SNAP_DEFAULT, .warmup = 0.2};
	const struct snap *s;
	int at_peak;
	size_t n;
	struct site *v = answer_sites(f, &a, &s, &at_peak, &n);
	EXPECT(at_peak); /* the file keeps at_peak_bytes: the exact peak */
	EXPECT(!strcmp(answer_moment_name(f, &a), "at the peak"));
	free(v);
	f->has_sel = 1, f->sel = 3; /* FILE@3 wins over --snapshot */
	a.snapshot = SNAP_LAST;
	v = answer_sites(f, &a, &s, &at_peak, &n);
	EXPECT(!at_peak && s->seq == 3 && !strcmp(answer_moment_name(f, &a), "at snapshot 3"));
	free(v);
}

TEST(growth_on_rows) {
	int steps[N] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
	struct mfile *f = load(snaps, N, steps, NULL);
	struct ask a = {.kind = -1, .snapshot = SNAP_DEFAULT, .warmup = 0.2};
	struct leaks l;
	answer_leaks(f, &a, &l);
	/* one suspect: the row of stacks 1 and 2, 128 KiB a step; the churn
	 * and the spike are none */
	EXPECT(l.n == 1 && l.mark && !strcmp(l.mark, "step"));
	EXPECT(l.n == 1 && l.v[0].r.nsites == 2 && fabs(l.v[0].per_step - 131072) < 1);
	leaks_free(&l);
}

TEST(spikes) {
	int steps[N] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
	struct mfile *f = load(snaps, N, steps, NULL);
	struct ask a = {.kind = -1, .snapshot = SNAP_DEFAULT, .warmup = 0.2};
	struct spike v[8];
	size_t n = answer_spikes(f, &a, v, 8);
	/* stack 4's 32 MiB is one; the leak (its peak is what it holds late)
	 * and the churn (1 MiB: under 4 MiB) are not */
	EXPECT(n == 1 && n && v[0].r.peak == 32 << 20 && v[0].r.live == 0);
	/* no peak_ms in this file: the time and step are unknown */
	EXPECT(n && v[0].peak_ms == -1 && isnan(v[0].step));
	spikes_free(v, n);
}

int
main(void) {
	make();
	RUN(window_by_steps);
	RUN(window_by_time);
	RUN(rows_group_sites_that_print_alike);
	RUN(moment_is_the_peak_unless_asked);
	RUN(growth_on_rows);
	RUN(spikes);
	return TEST_DONE();
}
