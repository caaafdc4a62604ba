/* files.c — writing the command's output files whole (files.h). */
#include "base/files.h"
#include "base/mem.h"
#include "base/sb.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
write_all(int fd, const void *data, size_t len) {
	const char *p = data;
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, p + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		done += (size_t)w;
	}
	return 0;
}

void
write_output(const char *path, const void *data, size_t len) {
	/* "-", /dev/stdout and /dev/stderr are the streams; a path that is
	 * itself a FIFO or a device (/dev/null) is written as it is -- renaming
	 * over it would replace /dev/null with a file.  A link is never
	 * followed (a planted one is replaced, below). */
	int stream = !strcmp(path, "-") || !strcmp(path, "/dev/stdout") ? 1
		     : !strcmp(path, "/dev/stderr")                   ? 2
								      : -1;
	struct stat st;
	if (stream < 0 && !lstat(path, &st) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) &&
	    !S_ISDIR(st.st_mode)) {
		/* O_NONBLOCK: a FIFO without a reader is an error, not a hang */
		int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
		if (fd >= 0)
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		int err = fd < 0 ? errno : write_all(fd, data, len);
		if (fd >= 0 && close(fd) && !err)
			err = errno;
		if (err)
			die(EXIT_USAGE, "%s: %s", path, strerror(err));
		return;
	}
	if (stream > 0) {
		fflush(stdout);
		int err = write_all(stream, data, len);
		if (err)
			die(EXIT_USAGE, "%s: %s", path, strerror(err));
		return;
	}
	struct sb tmp = {0};
	sb_printf(&tmp, "%s.XXXXXX", path);
	int fd = mkstemp(tmp.p); /* O_EXCL in path's own directory */
	if (fd < 0)
		die(EXIT_USAGE, "%s: %s", path, strerror(errno));
	mode_t um = umask(0);
	umask(um);
	int err = fchmod(fd, 0640 & ~um) /* as the shim's files: no access for others */ ? errno : 0;
	if (!err)
		err = write_all(fd, data, len);
	if (close(fd) && !err)
		err = errno;
	if (!err && rename(tmp.p, path))
		err = errno;
	if (err) {
		unlink(tmp.p);
		die(EXIT_USAGE, "%s: %s", path, strerror(err));
	}
	sb_free(&tmp);
}
