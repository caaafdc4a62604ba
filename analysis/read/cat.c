/* cat.c — `memtally cat`: a file's JSONL on stdout, decompressed when it
 * is zstd; damaged compressed data ends it with the file and byte named
 * (exit 1), after everything before it. */
#include "model/model.h"
#include "read/source.h"
#include "base/util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void
jsonl_cat(const char *path, int out) {
	struct stat st;
	struct src in = {.path = path, .fd = open_input(path, &st)};
	size_t cap = 1 << 20;
	char *buf = xmalloc(cap);
	for (;;) {
		ssize_t r = src_read(&in, buf, cap, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
		if (!r)
			break;
		if (write_all(out, buf, (size_t)r))
			die(EXIT_BAD_INPUT, "writing: %s", strerror(errno));
	}
	if (in.damage[0])
		die(EXIT_BAD_INPUT, "%s: %s", path, in.damage);
	src_close(&in);
	free(buf);
}
