/* summary.c — a file read for its totals and marks only, and many such
 * files read in parallel (model.h: run_load_summaries).
 *
 * `memtally ranks` and `top` need each snapshot's totals and marks, not
 * the stack records and call-site rows that make nearly all of a file's
 * bytes.  Two ways to them, the fast one first:
 *
 *   - A zstd file whose shim wrote summaries (doc/FORMAT.md, "Summaries")
 *     has after each snapshot's frame a skippable frame holding the
 *     snapshot's line without its rows (as a small zstd frame of its own,
 *     whose checksum refuses damage).  The frames are walked by their
 *     headers (ZSTD_findFrameCompressedSize reads block headers); a
 *     summary is parsed where one follows its snapshot's frame, that
 *     frame decoded to check it (its output thrown away: no line of it is
 *     parsed), and a frame without one (the first, for the header line;
 *     the last of a process killed between the two writes; a file from
 *     an older shim) is decoded and its lines taken as below.
 *   - Otherwise every line is read (lines.c) with ctx.summary set: a line
 *     is recognised by its first bytes (summary_keep), stack and other
 *     records are skipped unparsed and a snapshot's "callsites" array is
 *     cut out before the JSON parser sees it.
 *
 * The fast path is optimistic: anything it meets that is not a well-formed
 * file (a record refused, a corrupt frame, a NUL byte, a summary without
 * a snapshot before it, a skippable frame past the end) sends the whole
 * file to the second way, which names damage by file and line or byte as
 * every reader does: every damaged frame is said, and the exit status is
 * 1, as in every command (ranks exited 0 on a frame report refused, until
 * issue 51).  Decoding every frame is most of this path's time (32 rank
 * files of 80 MB of JSON each: 1.9 s of CPU against 0.07 s without the
 * check, 46 s for every line).  What it does not parse, it does not
 * check: a record in a frame whose summary was read (a stack defined
 * twice, a bad call-site row) goes unnoticed by a summary view (report
 * and leaks read it all).
 */
#include "read/reader.h"
#include "base/util.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

/* --- the fast path: zstd frames and their summaries --- */

struct fast {
	struct ctx c;
	struct jdoc d;
	ZSTD_DStream *z;
	char *buf;
	size_t cap, have;
	int cut;       /* the file ended inside a frame */
	char *scratch; /* a checked frame's output, thrown away */
};

#define SCRATCH ((size_t)ZSTD_BLOCKSIZE_MAX)

static uint32_t
rd32(const unsigned char *p) {
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void
take(struct fast *x, char *p, size_t len) {
	x->c.line++;
	if (len)
		record(&x->c, p, len);
}

/* The whole lines in x->buf; what follows the last newline is kept. */
static int
lines_of(struct fast *x, int first_only) {
	char *p = x->buf, *end = x->buf + x->have;
	int took = 0;
	for (char *nl; (!first_only || !took) && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
		take(x, p, (size_t)(nl - p));
		took = 1;
	}
	x->have = (size_t)(end - p);
	if (x->have)
		memmove(x->buf, p, x->have);
	return took;
}

/* Decode the frame at src[0..n) (to the end of the file when it was cut)
 * and take its lines (first_only: its first line, then stop).  0, or -1
 * where the data is corrupt or a line is not whole at the frame's end. */
static int
frame_lines(struct fast *x, const unsigned char *src, size_t n, int first_only) {
	ZSTD_DCtx_reset(x->z, ZSTD_reset_session_only);
	ZSTD_inBuffer in = {src, n, 0};
	x->have = 0;
	for (;;) {
		if (x->have == x->cap) {
			if (x->cap >= MT_MAX_LINE)
				return -1;
			x->cap *= 2;
			x->buf = xrealloc(x->buf, x->cap + 1);
		}
		ZSTD_outBuffer out = {x->buf + x->have, x->cap - x->have, 0};
		size_t rc = ZSTD_decompressStream(x->z, &out, &in);
		if (ZSTD_isError(rc))
			return -1;
		if (memchr(x->buf + x->have, 0, out.pos))
			return -1; /* a NUL byte: the line reader names it */
		x->have += out.pos;
		if (lines_of(x, first_only) && first_only)
			return 0;
		if (rc == 0) /* the frame's end: its last line ended it */
			return x->have ? -1 : 0;
		if (in.pos == in.size && !out.pos) { /* the file ends inside it */
			x->cut = 1;
			if (x->have) { /* a last line: taken if whole */
				x->c.last = 1;
				take(x, x->buf, x->have);
				x->c.last = 0;
			}
			x->have = 0;
			return 0;
		}
	}
}

/* Whether the whole frame at src[0..n) decodes, its output thrown away:
 * a frame whose summary is read is not parsed, but corrupt data in it
 * (or its checksum, or a NUL byte) sends the file to the line reader,
 * which names the damage as every command does (ranks exited 0 on a
 * frame report refused).  Decoding costs about a quarter of what reading
 * the lines would. */
static int
frame_whole(struct fast *x, const unsigned char *src, size_t n) {
	ZSTD_DCtx_reset(x->z, ZSTD_reset_session_only);
	ZSTD_inBuffer in = {src, n, 0};
	for (;;) {
		ZSTD_outBuffer out = {x->scratch, SCRATCH, 0};
		size_t rc = ZSTD_decompressStream(x->z, &out, &in);
		if (ZSTD_isError(rc) || memchr(x->scratch, 0, out.pos))
			return 0;
		if (rc == 0)
			return 1;
		if (in.pos == in.size && out.pos < out.size)
			return 0; /* it ends before its end */
	}
}

/* 0: read; -1: not by this path (the caller reads every line). */
static int
fast_read(struct fast *x, const unsigned char *p, size_t size) {
	size_t pos = 0, pend_at = 0, pend_n = 0;
	int pending = 0, frames = 0;
	while (pos < size) {
		if (size - pos < 8) { /* a frame header cut short */
			if (pending && frame_lines(x, p + pend_at, pend_n, 0))
				return -1;
			pending = 0;
			x->cut = 1;
			break;
		}
		uint32_t m = rd32(p + pos);
		if ((m & 0xFFFFFFF0u) == ZSTD_MAGIC_SKIPPABLE_START) {
			size_t n = rd32(p + pos + 4), left = size - pos - 8;
			if (n > left) { /* past the end: a summary cut short, or damage
					 * (said by the line reader) */
				if (!summary_cut(m, p + pos + 8, left, left))
					return -1;
				x->cut = 1;
				break;
			}
			if (m == MT_ZSTD_SUMMARY_MAGIC) {
				if (!pending)
					return -1; /* a summary of nothing */
				/* its snapshot's frame: the header line from the
				 * first; each checked whole */
				if (frames == 1 && frame_lines(x, p + pend_at, pend_n, 1))
					return -1;
				if (!frame_whole(x, p + pend_at, pend_n))
					return -1;
				pending = 0;
				/* a zstd frame of the line: its checksum refuses
				 * damage (then the frames say what it is) */
				size_t got = ZSTD_decompressDCtx(x->z, x->buf, x->cap, p + pos + 8, n);
				if (ZSTD_isError(got))
					return -1;
				x->have = got;
				lines_of(x, 0);
				if (x->have)
					return -1;
			}
			pos += 8 + n;
			continue;
		}
		if (m != ZSTD_MAGICNUMBER)
			return -1;
		if (pending && frame_lines(x, p + pend_at, pend_n, 0))
			return -1;
		size_t n = ZSTD_findFrameCompressedSize(p + pos, size - pos);
		frames++;
		if (ZSTD_isError(n)) { /* the last, cut short (else corrupt: decoding says) */
			if (frame_lines(x, p + pos, size - pos, 0))
				return -1;
			pending = 0;
			break;
		}
		pending = 1;
		pend_at = pos;
		pend_n = n;
		pos += n;
	}
	if (pending && frame_lines(x, p + pend_at, pend_n, 0))
		return -1;
	return x->c.f->version ? 0 : -1;
}

static const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

int
load_summary(struct mfile *f, const char *path, struct load_why *why) {
	struct stat st;
	int fd = open_input(path, &st);
	unsigned char m[4];
	void *map = MAP_FAILED;
	size_t size = (size_t)st.st_size;
	if (size >= 8 && pread(fd, m, 4, 0) == 4 && !memcmp(m, zstd_magic, 4))
		map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map != MAP_FAILED) {
		struct fast x = {0};
		jmp_buf jb;
		mfile_init(f, path);
		f->summary = 1;
		x.c.f = f;
		x.c.d = &x.d;
		x.c.jb = &jb;
		x.c.summary = 1;
		x.z = ZSTD_createDStream();
		x.cap = 1 << 20;
		x.buf = xmalloc(x.cap + 1);
		x.scratch = xmalloc(SCRATCH);
		madvise(map, size, MADV_SEQUENTIAL);
		volatile int ok = 0;
		if (!x.z)
			die(EXIT_BAD_INPUT, "%s: no memory for zstd", path);
		if (!setjmp(jb)) /* bad(): a record refused */
			ok = !fast_read(&x, map, size);
		if (x.c.pending) {
			snap_free(x.c.pending);
			free(x.c.pending);
		}
		f->truncated = x.cut;
		ZSTD_freeDStream(x.z);
		free(x.buf);
		free(x.scratch);
		free(x.c.pcs);
		summary_seen_free(&x.c);
		json_free(&x.d);
		munmap(map, size);
		if (ok) {
			memset(why, 0, sizeof *why);
			return 0;
		}
		mfile_free(f);
	}
	return load_file_as(f, path, why, 1);
}

/* --- many files, a thread per core --- */

struct pool {
	struct run *r;
	int *got;              /* per listed file: 0 read, -1 nothing usable */
	struct load_why *why;
	size_t next;
	pthread_mutex_t mu;
};

static void *
worker(void *arg) {
	struct pool *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		size_t i = p->next++;
		pthread_mutex_unlock(&p->mu);
		if (i >= p->r->nlist)
			return NULL;
		p->got[i] = load_summary(&p->r->files[i], p->r->list[i], &p->why[i]);
	}
}

static int
cores(void) {
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	const char *e = getenv("MEMTALLY_READERS");
	if (e && *e)
		n = strtol(e, NULL, 10);
	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

void
run_load_summaries(struct run *r, char **paths, int npaths) {
	run_list(r, paths, npaths, 0, 0);
	struct pool p = {.r = r};
	r->files = xcalloc(r->nlist + 1, sizeof *r->files);
	p.got = xcalloc(r->nlist + 1, sizeof *p.got);
	p.why = xcalloc(r->nlist + 1, sizeof *p.why);
	pthread_mutex_init(&p.mu, NULL);
	int n = cores();
	if ((size_t)n > r->nlist)
		n = (int)r->nlist;
	pthread_t *t = xcalloc((size_t)n + 1, sizeof *t);
	int started = 0;
	for (int i = 1; i < n; i++) /* this thread is one of them */
		started += !pthread_create(&t[started], NULL, worker, &p);
	worker(&p);
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&p.mu);
	free(t);
	/* in list order, as run_next keeps them */
	size_t k = 0;
	for (size_t i = 0; i < r->nlist; i++) {
		if (!p.got[i]) {
			struct mfile *f = &r->files[i];
			f->sel = phase_selector(f, r->sels[i]);
			f->has_sel = f->sel != SNAP_DEFAULT;
			if (k != i)
				r->files[k] = *f;
			k++;
			continue;
		}
		if (r->named[i])
			die(EXIT_BAD_INPUT, "%s", p.why[i].text);
		if (p.why[i].damage) {
			load_refused();
			fprintf(stderr, "memtally: %s; left out\n", p.why[i].text);
		} else {
			warnx("%s; left out", p.why[i].text);
		}
	}
	r->nfiles = r->nread = k;
	r->next = r->nlist;
	if (!k && r->nlist)
		die(EXIT_BAD_INPUT, "no file with a usable record among the %zu named", r->nlist);
	free(p.got);
	free(p.why);
}
