/* prog_steps N LAST — marks "step" 1..LAST through the C API, then "epoch"
 * 1..30 (another name), then "step" back to 0, up to 3 and to 25 (for
 * N = 10: no multiple reached from below, then two at once).  With N > 0
 * it waits after each mark that reaches a multiple of N from below (what
 * MEMTALLY_STEPS=N should snapshot) until its file (MEMTALLY_COMPRESS=0)
 * holds one more complete line of reason "step", so the test knows each
 * snapshot's step exactly; N = 0 waits for nothing.  Prints the number of
 * snapshots it waited for. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int (*mark)(const char *, double);
static char path[4096];

/* Complete lines of the file with "reason":"step". */
static int
step_snapshots(void) {
	static char buf[1 << 16];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	int n = 0, in_line = 0; /* the current line has the reason */
	const char *key = "\"reason\":\"step\"";
	size_t klen = strlen(key), carry = 0;
	ssize_t r;
	while ((r = read(fd, buf + carry, sizeof buf - carry - 1)) > 0) {
		size_t len = carry + (size_t)r;
		buf[len] = 0;
		size_t start = 0;
		for (size_t i = 0; i < len; i++) {
			if (buf[i] != '\n')
				continue;
			buf[i] = 0;
			if (in_line || strstr(buf + start, key))
				n++;
			in_line = 0;
			start = i + 1;
		}
		/* the unfinished line: keep its tail for a key cut in two */
		if (strstr(buf + start, key))
			in_line = 1;
		carry = len - start < klen ? len - start : klen;
		memmove(buf, buf + len - carry, carry);
	}
	close(fd);
	return n;
}

static void
find_file(void) {
	const char *out = getenv("MEMTALLY_OUT");
	char want[64];
	snprintf(want, sizeof want, ".p%d.jsonl", (int)getpid());
	DIR *d = opendir(out ? out : ".");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name), w = strlen(want);
		if (n > w && !strcmp(e->d_name + n - w, want))
			snprintf(path, sizeof path, "%s/%s", out ? out : ".", e->d_name);
	}
	if (d)
		closedir(d);
}

static void
wait_for(int count) {
	struct timespec ts = {0, 1000000};
	for (int i = 0; i < 60000; i++) { /* a minute: then it never came */
		if (!path[0]) /* the file is made at the first snapshot */
			find_file();
		if (path[0] && step_snapshots() >= count)
			return;
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "prog_steps: snapshot %d never came\n", count);
	exit(3);
}

static int every, want;
static double prev; /* the step mark's value, 0 before the first */

/* Mark a step; wait when the value reaches a multiple of N from below. */
static void
step(double v) {
	mark("step", v);
	int due = every && (long)(v / every) > (long)(prev / every);
	prev = v;
	if (due)
		wait_for(++want);
}

int
main(int argc, char **argv) {
	every = argc > 1 ? atoi(argv[1]) : 0;
	int last = argc > 2 ? atoi(argv[2]) : 30;
	mark = (int (*)(const char *, double))dlsym(RTLD_DEFAULT, "memtally_mark");
	if (!mark)
		return 2;
	for (int s = 1; s <= last; s++)
		step(s);
	for (int e = 1; e <= 30; e++)
		mark("epoch", e);
	step(0);
	step(3);
	step(25);
	printf("%d\n", want);
	return 0;
}
