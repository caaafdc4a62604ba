/* load.c — one whole file into the model, and what damage means for it.
 *
 * A file is read up to the first thing wrong in it (lines.c).  What came
 * before is used:
 *   - a last line or zstd frame cut short (a process killed while writing)
 *     is the normal end of such a file: f->truncated, no warning;
 *   - damage (a record refused, corrupt compressed data, a line too long,
 *     a NUL byte) is warned about naming the file and the line or byte,
 *     f->damaged, and the command's exit status becomes 1 (read_status);
 *   - a file with nothing usable (no header record) is not loaded: the
 *     caller says so (a file named alone: exit 1; in a directory it is
 *     left out, as an empty file is). */
#include "read/reader.h"
#include "base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int bad_input_seen;

int
read_status(void) {
	return bad_input_seen ? EXIT_BAD_INPUT : EXIT_OK;
}

void
mfile_init(struct mfile *f, const char *path) {
	memset(f, 0, sizeof *f);
	f->path = xstrdup(path);
	f->rank = f->pid = -1;
	f->cur_idx = -1;
}

/* Where a file without a snapshot was cut, and what the cut part gave:
 * a process killed while writing, said as such (not as a process that
 * wrote only its header). */
static void
cut_text(const struct lines *l, const char *path, char *buf, size_t n) {
	long whole = l->lines - (l->c.cut ? 1 : 0); /* a last line cut short is counted */
	if (l->in.mode == 2) {
		long got = whole - l->frame_lines;
		char lines[64] = "";
		if (got)
			snprintf(lines, sizeof lines, " (lines %ld-%ld)", l->frame_lines + 1, whole);
		snprintf(buf, n,
			 "%s: cut at byte %llu, inside the zstd frame that begins at byte %llu (a "
			 "process killed while writing it): that frame gave %ld whole record%s%s, and "
			 "no snapshot came before the cut",
			 path, (unsigned long long)l->in.raw, (unsigned long long)l->in.frame_at, got,
			 got == 1 ? "" : "s", lines);
		return;
	}
	snprintf(buf, n,
		 "%s:%ld: cut inside this line, which begins at byte %llu (a process killed while "
		 "writing it): the %ld records before it hold no snapshot",
		 path, whole + 1, (unsigned long long)l->taken, whole);
}

int
load_file(struct mfile *f, const char *path, struct load_why *why) {
	return load_file_as(f, path, why, 0);
}

int
load_file_as(struct mfile *f, const char *path, struct load_why *why, int summary) {
	mfile_init(f, path);
	f->summary = summary;
	memset(why, 0, sizeof *why);
	struct stat st;
	int fd = open_regular(path, &st, why->text, sizeof why->text);
	if (fd < 0) { /* a FIFO, a device, a socket: refused, never read */
		why->damage = 1;
		mfile_free(f);
		return -1;
	}
	if (!st.st_size) {
		close(fd);
		snprintf(why->text, sizeof why->text, "%s: empty file (no header record)", path);
		return -1;
	}
	struct lines l;
	lines_open(&l, f, f->path, fd, 8 << 20);
	l.c.summary = summary;
	while (!l.eof && !l.damage[0])
		lines_read(&l, SIZE_MAX, 0);
	int cut = l.cut, lines = (int)l.lines;
	char damage[sizeof l.damage];
	snprintf(damage, sizeof damage, "%s", l.damage);
	lines_close(&l);
	f->truncated = cut || damage[0];
	if (f->version && cut && !damage[0] && !f->nsnaps && !f->oom) {
		/* a header, maybe stacks, and the first snapshot cut: nothing to
		 * answer from, said for what it is (named alone: exit 1) */
		cut_text(&l, path, why->text, sizeof why->text);
		mfile_free(f);
		return -1;
	}
	if (!f->version) { /* nothing usable */
		why->damage = damage[0] != 0;
		if (damage[0])
			snprintf(why->text, sizeof why->text, "%s", damage);
		else if (cut && !lines)
			snprintf(why->text, sizeof why->text,
				 "%s: no complete record: the file ends inside its first %s (a process "
				 "killed while writing it)", path, l.in.mode == 2 ? "zstd frame" : "line");
		else
			snprintf(why->text, sizeof why->text, "%s:1: not a memtally file (no header record)",
				 path);
		mfile_free(f);
		return -1;
	}
	if (damage[0]) {
		f->damaged = 1;
		bad_input_seen = 1;
		fprintf(stderr, "memtally: %s; using the %d lines before it\n", damage, lines);
	}
	return 0;
}

void
load_refused(void) {
	bad_input_seen = 1;
}
