/* antest_read — the reader on damaged and hostile files, under ASan and
 * UBSan (-fno-sanitize-recover: an overflow or a NULL memcpy fails the
 * test): a file is read up to the damage and the lines before it are
 * used; sizes, counts and times that cannot be are refused; a bomb of
 * zeros is named at once; a request of 2^64-1 bytes stays that; a
 * followed file keeps a bounded number of snapshots that read as the
 * whole file does. */
#include "../test.h"
#include "cmd/cmd.h"
#include "model/model.h"
#include "base/util.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

const char *__asan_default_options(void);
const char *
__asan_default_options(void) {
	return "detect_leaks=0";
}

static const char header[] =
	"{\"type\":\"header\",\"version\":3,\"pid\":1,\"ppid\":0,\"rank\":null,\"host\":\"h\","
	"\"exe\":\"/x\",\"argv\":[\"x\"],\"start_wall_ns\":0,\"sample_bytes\":0}\n"
	"{\"type\":\"stack\",\"id\":5,\"pcs\":[\"0x10\"]}\n";

static char path[64];

/* data[0..n) as a file, its path returned */
static char *
file_of(const char *data, size_t n) {
	snprintf(path, sizeof path, "/tmp/antest_readXXXXXX");
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		abort();
	close(fd);
	return path;
}

static struct mfile *
load(const char *text) {
	static struct run r;
	char *p = file_of(text, strlen(text));
	run_load(&r, &p, 1);
	unlink(p);
	return r.nfiles == 1 ? &r.files[0] : NULL;
}

static char *
snap(int seq, const char *extra) {
	static char b[4096];
	snprintf(b, sizeof b,
		 "{\"type\":\"snapshot\",\"seq\":%d,\"reason\":\"every\",\"elapsed_ms\":%d,%s"
		 "\"callsites_mode\":\"full\",\"callsites\":[{\"stack\":5,\"kind\":\"heap\","
		 "\"live_bytes\":%d,\"live_count\":1,\"allocs\":1,\"alloc_bytes\":100,\"frees\":0,"
		 "\"peak_bytes\":100}]}\n",
		 seq, seq * 10, extra, 100 * (seq + 1));
	return b;
}

/* Two good snapshots, then one that says extra: the first two are used
 * and the file is marked damaged. */
static int
refused(const char *extra) {
	struct sb s = {0};
	sb_puts(&s, header);
	sb_puts(&s, snap(0, ""));
	sb_puts(&s, snap(1, ""));
	sb_puts(&s, snap(2, extra));
	struct mfile *f = load(s.p);
	sb_free(&s);
	return f && f->damaged && f->nsnaps == 2 && f->snaps[1].seq == 1;
}

TEST(negative_values_refused) {
	EXPECT(!refused("")); /* the control: a whole snapshot is taken */
	EXPECT(refused("\"wall_ns\":-1,"));
	EXPECT(refused("\"proc\":{\"rss_bytes\":-4096},"));
	EXPECT(refused("\"heap\":{\"live_bytes\":10,\"allocs\":-3},"));
	EXPECT(refused("\"heap\":{\"live_bytes\":10,\"alloc_bytes\":1e999},"));
	/* elapsed_ms -99999999999 was printed as -1215752191ms */
	struct sb s = {0};
	sb_puts(&s, header);
	sb_puts(&s, snap(0, ""));
	char *neg = strstr(snap(1, ""), "\"elapsed_ms\":10");
	sb_puts_n(&s, snap(1, ""), (size_t)(neg - snap(1, "")));
	sb_puts(&s, "\"elapsed_ms\":-99999999999");
	sb_puts(&s, neg + strlen("\"elapsed_ms\":10"));
	struct mfile *f = load(s.p);
	EXPECT(f && f->damaged && f->nsnaps == 1);
	sb_free(&s);
	char t[16];
	EXPECT(!strcmp(human_ms(-99999999999LL, t), "-27777h46m"));
	EXPECT(!strcmp(human_ms(INT64_MIN, t), "-2562047788015h")); /* cut to 15 */
}

/* load.c:393 (before the split): ar + hb overflowed with hblkhd 1e999
 * (a double, taken as INT64_MAX) or two large integers. */
TEST(allocator_footprint_overflow) {
	EXPECT(refused("\"allocator\":{\"arena_bytes\":10,\"hblkhd_bytes\":1e999},"));
	struct sb s = {0};
	sb_puts(&s, header);
	sb_puts(&s, snap(0, "\"allocator\":{\"arena_bytes\":10,\"hblkhd_bytes\":9223372036854775807},"));
	struct mfile *f = load(s.p);
	EXPECT(f && !f->damaged && f->nsnaps == 1 && f->snaps[0].alloc_footprint == INT64_MAX);
	sb_free(&s);
}

/* model.c:127: memcpy(v, NULL, 0) for a snapshot without call sites. */
TEST(no_call_sites) {
	struct sb s = {0};
	sb_puts(&s, header);
	sb_puts(&s, "{\"type\":\"snapshot\",\"seq\":0,\"reason\":\"exit\",\"elapsed_ms\":1,"
		    "\"callsites_mode\":\"full\",\"callsites\":[]}\n");
	struct mfile *f = load(s.p);
	EXPECT(f && f->nsnaps == 1);
	size_t n = 1;
	struct site *v = f ? snap_sites(f, &f->snaps[0], &n) : NULL;
	EXPECT(v && n == 0);
	free(v);
	sb_free(&s);
}

static const char dump_head[] =
	"{\"type\":\"oom\",\"kind\":\"cuda\",\"api\":\"cuMemAlloc_v2\",\"requested_bytes\":%s,"
	"\"error\":\"CUDA_ERROR_OUT_OF_MEMORY\",\"device\":0,\"elapsed_ms\":5}\n"
	"{\"type\":\"segment\",\"kind\":\"cuda\",\"address\":\"0x7000000\",\"size\":4096,"
	"\"stack\":5,\"time_ms\":%s,\"device\":0,\"stream\":0}\n"
	"{\"type\":\"trace\",\"kind\":\"cuda\",\"op\":\"alloc\",\"address\":\"0x7000000\","
	"\"size\":4096,\"stack\":5,\"time_ms\":%s}\n";

static struct mfile *
dump(const char *req, const char *t, char *p, size_t n) {
	struct sb s = {0};
	sb_puts(&s, header);
	sb_printf(&s, dump_head, req, t, t);
	sb_puts(&s, "{\"type\":\"snapshot\",\"seq\":0,\"reason\":\"oom\",\"elapsed_ms\":5,"
		    "\"callsites_mode\":\"full\",\"callsites\":[]}\n");
	struct run r;
	char *fp = file_of(s.p, s.len);
	snprintf(p, n, "%s", fp);
	run_load(&r, &fp, 1);
	sb_free(&s);
	return &r.files[0];
}

/* torch.c:131: time_ms * 1000 overflowed with a time of 10^16 ms; the
 * reader bounds times (2^42 ms), and the largest it takes converts. */
TEST(torch_times) {
	char p[64], out[80];
	struct mfile *f = dump("1024", "10000000000000000", p, sizeof p);
	EXPECT(f->damaged && f->nsegs == 0);
	char *paths[] = {p};
	snprintf(out, sizeof out, "%s.pickle", p);
	struct opts o = {.out = out, .paths = paths, .npaths = 1, .torch_version = 2, .kind = -1};
	EXPECT(cmd_torch(&o) == 0); /* what came before the refused segment */
	unlink(p);
	unlink(out);
	f = dump("1024", "4398046511104", p, sizeof p);
	EXPECT(!f->damaged && f->nsegs == 1 && f->nevents == 1);
	snprintf(out, sizeof out, "%s.pickle", p);
	paths[0] = p;
	EXPECT(cmd_torch(&o) == 0);
	unlink(p);
	unlink(out);
}

/* A request of 2^64-1 bytes (malloc(SIZE_MAX)) was printed as 8192 PiB. */
TEST(request_of_2_64) {
	char p[64], b[16];
	struct mfile *f = dump("18446744073709551615", "1", p, sizeof p);
	unlink(p);
	EXPECT(f->oom && f->oom->requested == UINT64_MAX);
	EXPECT(!strcmp(human_u64(UINT64_MAX, b), "16.0 EiB"));
	f = dump("18446744073709551616", "1", p, sizeof p); /* 2^64: not a byte count */
	unlink(p);
	EXPECT(f->damaged && !f->oom);
}

/* 64 MiB of zeros in a zstd frame (a few KiB): named as soon as its
 * first bytes are read, not after the whole of it was buffered. */
TEST(zstd_bomb) {
	size_t n = 64 << 20, cap = ZSTD_compressBound(n);
	char *zeros = calloc(1, n), *z = malloc(cap);
	size_t zn = ZSTD_compress(z, cap, zeros, n, 1);
	EXPECT(!ZSTD_isError(zn) && zn < 64 << 10);
	struct sb s = {0};
	sb_puts(&s, header); /* a good start, then the bomb */
	char *hz = malloc(ZSTD_compressBound(s.len));
	size_t hn = ZSTD_compress(hz, ZSTD_compressBound(s.len), s.p, s.len, 1);
	struct sb both = {0};
	sb_puts_n(&both, hz, hn);
	sb_puts_n(&both, z, zn);
	char *p = file_of(both.p, both.len);
	struct run r;
	run_load(&r, &p, 1);
	unlink(p);
	EXPECT(r.nfiles == 1 && r.files[0].damaged && r.files[0].nstacks == 2);
	free(zeros), free(z), free(hz);
	sb_free(&s), sb_free(&both);
}

/* zstd frames, one a snapshot; the last cut short, then one corrupted:
 * the snapshots before are read either way, the cut one is no damage. */
TEST(zstd_cut_and_corrupt) {
	struct sb s = {0};
	size_t cap = 1 << 20;
	char *z = malloc(cap);
	size_t zn = ZSTD_compress(z, cap, header, strlen(header), 3), at[5];
	sb_puts_n(&s, z, zn);
	for (int i = 0; i < 5; i++) {
		const char *l = snap(i, "");
		at[i] = s.len;
		zn = ZSTD_compress(z, cap, l, strlen(l), 3);
		sb_puts_n(&s, z, zn);
	}
	struct run r;
	char *p = file_of(s.p, s.len - 7);
	run_load(&r, &p, 1);
	EXPECT(r.nfiles == 1 && r.files[0].nsnaps == 4 && r.files[0].truncated && !r.files[0].damaged);
	unlink(p);
	for (size_t i = at[3] + 6; i < at[3] + 20; i++)
		s.p[i] ^= 0x5a;
	p = file_of(s.p, s.len);
	run_load(&r, &p, 1);
	EXPECT(r.nfiles == 1 && r.files[0].nsnaps == 3 && r.files[0].damaged);
	unlink(p);
	free(z);
	sb_free(&s);
}

/* A followed file keeps at most 256 snapshots; each kept one reads as
 * in the whole file (its dropped predecessors' rows carried forward). */
TEST(follow_bounded) {
	struct sb s = {0};
	sb_puts(&s, header);
	for (int i = 6; i < 60; i++)
		sb_printf(&s, "{\"type\":\"stack\",\"id\":%d,\"pcs\":[\"0x%x\"]}\n", i, i * 16);
	for (int i = 0; i < 2000; i++) {
		sb_printf(&s, "{\"type\":\"snapshot\",\"seq\":%d,\"reason\":\"every\",\"elapsed_ms\":%d,"
			      "\"callsites_mode\":\"%s\",\"callsites\":[",
			  i, i * 1000, i ? "delta" : "full");
		for (int k = 0; k < (i ? 2 : 55); k++) /* a delta changes two sites */
			sb_printf(&s, "%s{\"stack\":%d,\"kind\":\"heap\",\"live_bytes\":%d,\"live_count\":1,"
				      "\"allocs\":%d,\"alloc_bytes\":1,\"frees\":0,\"peak_bytes\":1}",
				  k ? "," : "", 5 + (i ? (i * 7 + k * 13) % 55 : k), i * 100 + k, i + 1);
		sb_puts(&s, "]}\n");
	}
	char *p = file_of(s.p, s.len);
	struct run r;
	run_load(&r, &p, 1);
	struct follow *w = follow_open(p);
	while (follow_pending(w, NULL))
		follow_poll(w, 64 << 10);
	struct mfile *f = follow_file(w), *all = &r.files[0];
	printf("  %zu of %zu snapshots kept\n", f->nsnaps, all->nsnaps);
	EXPECT(all->nsnaps == 2000 && f->nsnaps <= 256 && f->nsnaps >= 100);
	EXPECT(f->snaps[0].seq == 0 && f->snaps[f->nsnaps - 1].seq == 1999);
	int same = 1;
	for (size_t i = 0; i < f->nsnaps; i++) {
		size_t na, nb;
		struct site *a = snap_sites(f, &f->snaps[i], &na);
		struct site *b = snap_sites(all, &all->snaps[f->snaps[i].seq], &nb);
		int64_t sa = 0, sb2 = 0;
		for (size_t k = 0; k < na; k++)
			sa += a[k].live_bytes * (int64_t)stack_file_id(f, a[k].stack);
		for (size_t k = 0; k < nb; k++)
			sb2 += b[k].live_bytes * (int64_t)stack_file_id(all, b[k].stack);
		same &= na == nb && sa == sb2;
		free(a), free(b);
	}
	EXPECT(same);
	follow_close(w);
	unlink(p);
	sb_free(&s);
}

int
main(void) {
	RUN(negative_values_refused);
	RUN(allocator_footprint_overflow);
	RUN(no_call_sites);
	RUN(torch_times);
	RUN(request_of_2_64);
	RUN(zstd_bomb);
	RUN(zstd_cut_and_corrupt);
	RUN(follow_bounded);
	return TEST_DONE();
}
