/* fuzz_cmd.c — libFuzzer harness for the memtally command (issue 9).  Each
 * input is one memtally file, handed to the commands as a memfd; a bad
 * record's die() jumps back here (MT_FUZZ) instead of exiting.
 *   FUZZ_READER:  report, leaks, ranks, oom (the JSONL reader, the replay of
 *                 call-site deltas, the statistics and the text/JSON output)
 *   FUZZ_WRITERS: torch (the pickle writer), html and flame (the page's
 *                 inline data and the SVG)
 * Built and run for a bounded time by test/fuzz/run.sh (`make check`). */
#include "cmd.h"
#include "util.h"
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static char out_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv) {
	(void)argc;
	(void)argv;
	snprintf(out_path, sizeof out_path, "/tmp/memtally-fuzz.%d.out", (int)getpid());
	int null = open("/dev/null", O_WRONLY);
	dup2(null, 1); /* the commands' reports */
	close(null);
	return 0;
}

static void
one(int (*cmd)(struct opts *), const char *path, const char *out) {
	char *paths[1] = {(char *)path};
	struct opts o = {.top = 10, .kind = -1, .warmup = 0.2, .metric = "live", .snapshot = -1,
			 .out = out, .paths = paths, .npaths = 1};
	jmp_buf jb;
	mt_fuzz_jmp = &jb;
	if (!setjmp(jb))
		cmd(&o);
	mt_fuzz_jmp = NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	int fd = memfd_create("memtally.fuzz.jsonl", 0);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
#ifdef FUZZ_WRITERS
	one(cmd_torch, path, out_path);
	one(cmd_html, path, out_path);
	one(cmd_flame, path, out_path);
#else
	one(cmd_report, path, NULL);
	one(cmd_leaks, path, NULL);
	one(cmd_ranks, path, NULL);
	one(cmd_oom, path, NULL);
#endif
	close(fd);
	return 0;
}
