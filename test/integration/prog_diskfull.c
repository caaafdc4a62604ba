/* prog_diskfull DIR — fills DIR's filesystem to all but 4 KiB (DIR/fill),
 * asks for eight snapshots (memtally_snapshot, when the shim is loaded),
 * then writes the last 4 KiB: "last write ok" or "last write: <error>"
 * (exit 4).  Then removes the fill and asks for one more snapshot: the
 * space is back ("done").  Run by test_limits.py with and without the
 * shim. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int
snap(const char *label) {
	int (*f)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memtally_snapshot");
	return f ? f(label) : -1;
}

int
main(int argc, char **argv) {
	char path[4096];
	snprintf(path, sizeof path, "%s/fill", argc > 1 ? argv[1] : ".");
	static char buf[1 << 16];
	memset(buf, 'x', sizeof buf);
	for (int i = 0; i < 64; i++) /* something to record */
		free(malloc(1000 + i));
	struct statvfs sv;
	if (statvfs(path[0] ? argv[1] : ".", &sv))
		return 2;
	unsigned long long avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 2;
	unsigned long long want = avail - (4 << 10), done = 0;
	while (done < want) {
		size_t n = want - done < sizeof buf ? (size_t)(want - done) : sizeof buf;
		ssize_t w = write(fd, buf, n);
		if (w <= 0) {
			printf("fill: %s at %llu of %llu\n", strerror(errno), done, want);
			return 3;
		}
		done += (unsigned long long)w;
	}
	fsync(fd);
	for (int i = 0; i < 8; i++) {
		void *keep[200];
		for (int j = 0; j < 200; j++) /* new call sites' worth of records */
			keep[j] = malloc(100 + j * 13 + i);
		snap("full");
		for (int j = 0; j < 200; j++)
			free(keep[j]);
	}
	ssize_t w = write(fd, buf, 4 << 10);
	if (w != (4 << 10)) {
		printf("last write: %s\n", w < 0 ? strerror(errno) : "short");
		return 4;
	}
	close(fd);
	printf("last write ok\n");
	unlink(path);
	snap("space back");
	printf("done\n");
	return 0;
}
