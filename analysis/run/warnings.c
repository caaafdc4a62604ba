/* run/warnings.c — the shim's warnings, from the files, said once at the
 * end of a run (run.h). */
#include "run/run.h"
#include "base/util.h"
#include "shim/format.h"
#include "read/json.h"
#include "read/source.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The warning records of one file (doc/FORMAT.md) into the distinct
 * messages msgs[0..*n) and their processes' counts; a file that is not
 * regular or cannot be read is passed over (the views will say why). */
#define MAX_WARNINGS 64
static void
file_warnings(const char *path, char **msgs, int *count, int *n) {
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return;
	}
	struct src in = {.path = path, .fd = fd};
	size_t cap = 1 << 20;
	char *buf = xmalloc(cap);
	struct sb line = {0};
	char *seen[MAX_WARNINGS];
	int nseen = 0;
	static const char pre[] = "{" MT_KEY(MT_F_TYPE) "\"" MT_R_WARNING "\"";
	for (;;) {
		ssize_t r = src_read(&in, buf, cap, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (char *p = buf, *end = buf + r; p < end;) {
			char *nl = memchr(p, '\n', (size_t)(end - p));
			/* only a line that begins as a warning record is kept */
			size_t take = (size_t)((nl ? nl : end) - p);
			if (line.len < sizeof pre)
				sb_puts_n(&line, p, take);
			else if (!strncmp(line.p, pre, sizeof pre - 1))
				sb_puts_n(&line, p, take);
			if (!nl)
				break;
			p = nl + 1;
			if (line.len && !strncmp(line.p, pre, sizeof pre - 1)) {
				struct jdoc d = {0};
				const char *err;
				size_t col;
				sb_putc(&line, 0);
				struct jv *o = json_parse(&d, line.p, line.len - 1, &err, &col);
				const char *m = o ? json_str(&d, o, MT_F_MESSAGE) : NULL;
				int dup = 0;
				for (int i = 0; m && i < nseen && !dup; i++)
					dup = !strcmp(seen[i], m);
				if (m && !dup && nseen < MAX_WARNINGS) { /* once per process */
					seen[nseen++] = xstrdup(m);
					int i = 0;
					while (i < *n && strcmp(msgs[i], m))
						i++;
					if (i == *n && *n < MAX_WARNINGS)
						msgs[(*n)++] = xstrdup(m), count[i] = 0;
					if (i < *n)
						count[i]++;
				}
				json_free(&d);
			}
			line.len = 0;
		}
	}
	for (int i = 0; i < nseen; i++)
		free(seen[i]);
	sb_free(&line);
	free(buf);
	src_close(&in);
}

/* Each distinct warning of this run's files (made since start), once:
 * the shim keeps the program's stderr clean under `memtally run`
 * (MEMTALLY_QUIET=1) and writes its warnings into the files. */
void
print_warnings(const char *absout, const struct timespec *start) {
	DIR *d = opendir(absout);
	struct dirent *e;
	char *msgs[MAX_WARNINGS];
	int count[MAX_WARNINGS], n = 0;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "memtally.", 9) || !strstr(e->d_name, ".jsonl"))
			continue;
		struct sb p = {0};
		sb_printf(&p, "%s/%s", absout, e->d_name);
		struct stat st;
		if (!lstat(p.p, &st) && S_ISREG(st.st_mode) &&
		    (st.st_ctim.tv_sec > start->tv_sec ||
		     (st.st_ctim.tv_sec == start->tv_sec && st.st_ctim.tv_nsec >= start->tv_nsec)))
			file_warnings(p.p, msgs, count, &n);
		sb_free(&p);
	}
	if (d)
		closedir(d);
	for (int i = 0; i < n; i++) {
		fprintf(stderr, "memtally: warning from %d process%s: %s\n", count[i],
			count[i] == 1 ? "" : "es", msgs[i]);
		free(msgs[i]);
	}
}
