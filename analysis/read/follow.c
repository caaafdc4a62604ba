/* follow.c — a file followed as it grows (memtally top): each poll reads
 * what was appended since the last (never the whole file again), whole
 * lines only; a line still being written waits in the buffer for the
 * rest.  Damage stops the following of that file, said once. */
#include "model/model.h"
#include "read/reader.h"
#include "base/util.h"
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct follow {
	struct mfile f;
	struct lines l;
	int warned;
};

struct follow *
follow_open(const char *path) {
	struct stat st;
	char why[PATH_MAX + 128];
	int fd = open_regular(path, &st, why, sizeof why);
	if (fd < 0) { /* a FIFO, a device: refused (exit 1), never read */
		warnx("%s; left out", why);
		load_refused();
		return NULL;
	}
	struct follow *w = xcalloc(1, sizeof *w);
	mfile_init(&w->f, path);
	lines_open(&w->l, &w->f, w->f.path, fd, 1 << 20);
	return w;
}

struct mfile *
follow_file(struct follow *w) {
	return &w->f;
}

/* The most snapshots a followed file keeps: beyond, about half are left
 * out (mfile_thin), those of the last two minutes last (top's "last
 * minute" and `leaks`' 80 points still find theirs).  Memory then follows
 * the call sites that change, not the length of the run. */
#define FOLLOW_SNAPS 256

/* At most `budget` bytes are read a call, so one huge file does not hold
 * up a refresh for long. */
static long
poll_as(struct follow *w, size_t budget, int wait) {
	long n = lines_read(&w->l, budget, wait);
	while (w->f.nsnaps > FOLLOW_SNAPS) {
		mfile_thin(&w->f, 120000);
		w->l.c.rows_ref = 0; /* indexes moved (snaprec.c's repeated rows) */
	}
	if (w->l.damage[0] && !w->warned) {
		w->warned = 1;
		load_refused(); /* top --once: exit 1, as every command on damage */
		w->f.damaged = w->f.truncated = 1;
		warnx("%s; not followed further", w->l.damage);
	}
	return n;
}

long
follow_poll(struct follow *w, size_t budget) {
	return poll_as(w, budget, 1);
}

long
follow_last(struct follow *w, size_t budget) {
	long n = 0;
	while (!w->l.eof && !w->l.damage[0])
		n += poll_as(w, budget, 0);
	return n;
}

uint64_t
follow_pending(struct follow *w, uint64_t *size) {
	struct stat st;
	uint64_t n = !fstat(w->l.in.fd, &st) ? (uint64_t)st.st_size : w->l.in.raw;
	if (size)
		*size = n;
	return n > w->l.in.raw && !w->l.damage[0] ? n - w->l.in.raw : 0;
}

void
follow_close(struct follow *w) {
	lines_close(&w->l);
	free(w);
}
