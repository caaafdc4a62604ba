/* cat.c — `memtally cat`: a file's JSONL on stdout, decompressed when it
 * is zstd; damaged compressed data ends it with the file and byte named
 * (exit 1), after everything before it.  FILE@N stops after snapshot N's
 * line: the file as it was when that snapshot was written (every record
 * refers only to earlier ones, so it reads as a whole file). */
#include "model/model.h"
#include "read/source.h"
#include "base/sb.h"
#include "base/util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A line's snapshot seq, or -1 when it is not a snapshot record. */
static long
line_seq(const char *p, size_t n) {
	static const char snap[] = "\"type\":\"snapshot\"";
	size_t look = n < 256 ? n : 256; /* the shim writes type and seq first */
	if (!memmem(p, look, snap, sizeof snap - 1))
		return -1;
	const char *q = memmem(p, look, "\"seq\":", 6);
	return q ? strtol(q + 6, NULL, 10) : -1;
}

void
jsonl_cat_upto(const char *path, int out, long upto) {
	struct stat st;
	struct src in = {.path = path, .fd = open_input(path, &st)};
	size_t cap = 1 << 20;
	char *buf = xmalloc(cap);
	struct sb line = {0}; /* with upto: the line being read */
	int found = 0;
	while (!found) {
		ssize_t r = src_read(&in, buf, cap, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
		if (!r)
			break;
		size_t from = 0, to = (size_t)r;
		if (upto >= 0) { /* up to the end of snapshot upto's line */
			for (size_t i = 0; i < (size_t)r && !found; i++) {
				if (buf[i] != '\n')
					continue;
				sb_puts_n(&line, buf + from, i + 1 - from);
				found = line_seq(line.p, line.len) == upto;
				line.len = 0;
				from = i + 1;
				to = i + 1;
			}
			if (!found) {
				sb_puts_n(&line, buf + from, (size_t)r - from);
				to = (size_t)r;
			}
			from = 0;
		}
		if (write_all(out, buf + from, to - from))
			die(EXIT_BAD_INPUT, "writing: %s", strerror(errno));
	}
	sb_free(&line);
	if (in.damage[0])
		die(EXIT_BAD_INPUT, "%s: %s", path, in.damage);
	src_close(&in);
	free(buf);
	if (upto >= 0 && !found)
		die(EXIT_BAD_INPUT, "%s: no snapshot %ld in this file", path, upto);
}

void
jsonl_cat(const char *path, int out) {
	jsonl_cat_upto(path, out, -1);
}
