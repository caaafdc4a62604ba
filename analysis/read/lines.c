/* lines.c — a file's JSONL a line at a time into the model (reader.h),
 * for a whole file (load.c) and for one still growing (follow.c).
 *
 * Lines are read with read(2) into one reused buffer (a private writable
 * mapping would take a copy-on-write fault per page the parser writes,
 * which costs more than the copy) and parsed in place.  A line is at most
 * MT_MAX_LINE bytes and holds no NUL byte (the shim escapes every control
 * character): a file of zeros or a decompression bomb is named for what it
 * is as soon as its first bytes are read, with memory bounded by that.
 *
 * Reading stops at the first thing wrong (a record refused, corrupt
 * compressed data, a line too long); l->damage says what and where, and
 * the model holds what the lines before it said. */
#include "read/reader.h"
#include "base/util.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
lines_open(struct lines *l, struct mfile *f, const char *path, int fd, size_t cap) {
	memset(l, 0, sizeof *l);
	l->in.path = path;
	l->in.fd = fd;
	l->cap = cap;
	l->buf = xmalloc(cap + 1);
	l->c.f = f;
	l->c.d = &l->d;
}

static void
take_line(struct lines *l, char *p, size_t len) {
	l->c.line++;
	if (len)
		record(&l->c, p, len);
	uint64_t text = l->taken + len + 1;
	if (l->c.held > RD_MEM_RATIO * text && l->c.held > RD_MEM_FLOOR)
		bad(&l->c, "the records up to here take %llu MiB of memory for %llu MiB of JSONL: more "
			   "than %d times their text (small records that each cost much, not the "
			   "shim's writing)",
		    (unsigned long long)(l->c.held >> 20), (unsigned long long)(text >> 20), RD_MEM_RATIO);
	l->lines++;
}

/* The whole lines in buf[0..have) into the model; what follows the last
 * newline (a line not complete yet) is moved to the front. */
static void
whole_lines(struct lines *l) {
	char *p = l->buf, *end = l->buf + l->have;
	for (char *nl; (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
		take_line(l, p, (size_t)(nl - p));
		l->taken += (uint64_t)(nl + 1 - p);
	}
	l->have = (size_t)(end - p);
	if (l->have) /* memmove(NULL, ..., 0) is undefined */
		memmove(l->buf, p, l->have);
}

static void
damaged(struct lines *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
damaged(struct lines *l, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->damage, sizeof l->damage, fmt, ap);
	va_end(ap);
}

/* Room for more of a line: the buffer doubles up to MT_MAX_LINE. */
static int
room(struct lines *l) {
	if (l->have < l->cap)
		return 1;
	if (l->cap >= MT_MAX_LINE) {
		damaged(l, "%s:%ld: a line longer than %u MiB (at byte %llu of the JSONL): not a "
			   "memtally record (a file of other data, or a decompression bomb)",
			l->in.path, l->c.line + 1, MT_MAX_LINE >> 20, (unsigned long long)l->taken);
		return 0;
	}
	l->cap = l->cap * 2 > MT_MAX_LINE ? MT_MAX_LINE : l->cap * 2;
	l->buf = xrealloc(l->buf, l->cap + 1);
	return 1;
}

/* A last line without a newline at the end of the file: a write cut
 * short when it does not parse (record() sets c.cut), else a record like
 * any other. */
static void
last_line(struct lines *l) {
	l->c.last = 1;
	take_line(l, l->buf, l->have);
	l->c.last = 0;
	l->cut |= l->c.cut;
}

static void
read_some(struct lines *l, size_t budget, int wait) {
	size_t got = 0;
	while (got < budget && room(l)) {
		ssize_t r = src_read(&l->in, l->buf + l->have, l->cap - l->have, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			damaged(l, "%s: %s", l->in.path, strerror(errno));
			break;
		}
		if (l->in.damage[0]) {
			damaged(l, "%s: %s", l->in.path, l->in.damage);
			break;
		}
		if (!r) {
			if (!wait && l->have)
				last_line(l);
			l->have = wait ? l->have : 0;
			l->eof = !wait;
			l->cut |= !wait && src_cut(&l->in);
			break;
		}
		got += (size_t)r;
		char *z = memchr(l->buf + l->have, 0, (size_t)r);
		if (z) {
			l->have = (size_t)(z - l->buf);
			whole_lines(l); /* the lines before it are whole */
			damaged(l, "%s:%ld: a NUL byte (byte %llu of the JSONL): not a memtally record "
				   "(a file of other data, or damaged)",
				l->in.path, l->c.line + 1, (unsigned long long)(l->taken + l->have));
			break;
		}
		l->have += (size_t)r;
		whole_lines(l);
		if (l->in.mode == 2 && !l->in.in_frame) /* a frame ended: its lines are whole */
			l->frame_lines = l->lines;
	}
}

long
lines_read(struct lines *l, size_t budget, int wait) {
	if (l->damage[0] || l->eof)
		return 0;
	jmp_buf jb;
	long before = l->lines;
	l->c.jb = &jb;
	if (setjmp(jb)) { /* a record refused: bad() said why */
		snprintf(l->damage, sizeof l->damage, "%s", l->c.why);
		if (l->c.pending) {
			snap_free(l->c.pending);
			free(l->c.pending);
			l->c.pending = NULL;
		}
	} else {
		read_some(l, budget, wait);
	}
	l->c.jb = NULL;
	return l->lines - before;
}

void
lines_close(struct lines *l) {
	src_close(&l->in);
	free(l->buf);
	free(l->c.pcs);
	summary_seen_free(&l->c);
	json_free(&l->d);
	l->buf = NULL;
	l->c.pcs = NULL;
}
