/*
 * file.c — the output file's name, directory, identity and (re)opening
 * (file.h).
 */
#include "platform/glue.h"
#include "output/file.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "platform/fdio.h"
#include <sys/statfs.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

/* Modes (the umask may take more away): no access for other users, read
 * for the group, so a team that shares a group can read a run's files,
 * and argv (which may hold secrets) is not world-readable. */
#define DIR_MODE 0750
#define FILE_MODE 0640

static char host[256];
static int fd = -1;
static char path[1200];
static unsigned path_x;   /* the ".x<N>" this image's file took, 0 = none */
static int opened_once;   /* this image (or fork child) has made its file */
static int open_failed;   /* warned once */
/* Where the descriptor may stay between writes: out of the program's
 * range (above its soft limit, in the room glue.h makes), or in a large
 * range (a soft limit above MT_FDROOM_MAX), or held for a change of
 * identity (mt_file_hold).  Else (a limit of at most MT_FDROOM_MAX that
 * the shim may not raise: soft = hard, unprivileged) it is closed after
 * each write (mt_file_release) and the file opened again, appending, for
 * the next: the program has every descriptor of its range, as without
 * the shim, and a snapshot asked while it has them all open is lost. */
static int keep, hold;
static int released;      /* closed by mt_file_release: same file next */
/* Our file's identity: a program that closes every descriptor (or
 * close_range at start) and opens its own files may be handed our number;
 * before each snapshot the descriptor is checked and, if it is no longer
 * our file, left alone and the file opened again (appending); and every
 * write, seek and truncation checks it again in the same step as it acts
 * (platform/fdio.h), so a number handed to the program mid-snapshot gets
 * nothing of ours. */
static uint64_t file_dev, file_ino;

void
mt_file_init(void) {
	struct {
		char f[6][65];
	} uts;
	if (mt_sys(SYS_uname, &uts, 0, 0, 0, 0, 0) == 0) {
		size_t i, n = strlen(uts.f[1]);
		for (i = 0; i < n && i < sizeof host - 1; i++) /* safe in a name */
			host[i] = (uts.f[1][i] == '/' || uts.f[1][i] == '.')
					  ? '_'
					  : uts.f[1][i];
		host[i] = 0;
	}
	if (!host[0])
		memcpy(host, "localhost", 10);
}

const char *
mt_file_host(void) {
	return host;
}

/* <out>/memtally.<host>[.r<rank>].p<pid><suffix> into dst: the one place
 * both the main file's and the dumps' names are made. */
static void
name(char *dst, size_t n, const char *fmt, unsigned x) {
	struct mt_buf b;
	mt_buf_fixed(&b, dst, n - 1);
	mt_buf_printf(&b, "%s/memtally.%s.", mt_cfg.out, host);
	if (mt_cfg.rank >= 0)
		mt_buf_printf(&b, "r%ld.", mt_cfg.rank);
	mt_buf_printf(&b, "p%ld", mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0));
	mt_buf_printf(&b, fmt, x);
	dst[b.len] = 0;
}

static void
make_path_x(unsigned x) {
	name(path, sizeof path,
	     mt_cfg.compress ? (x ? ".x%u.jsonl.zst" : ".jsonl.zst") : (x ? ".x%u.jsonl" : ".jsonl"), x);
	path_x = x;
}

/* Make the missing directories of dir (DIR_MODE) and open it, checked:
 *  - a symbolic link on the path is followed only if it is ours or
 *    root's (one planted by another user in a directory they may write
 *    to would send our files where they chose);
 *  - the directory itself is ours; for a process other than root a
 *    directory of root's (/tmp) is taken too; root takes only its own
 *    (another user's directory would hand them our files, whose argv may
 *    hold secrets, and the names in it).
 * The files are then made relative to the descriptor (openat), so the
 * path is not looked up again between the check and the open.
 * Returns the descriptor, or -errno (-EPERM: another user's). */
static long
open_dir(const char *dir) {
	char tmp[1024];
	size_t n = strlen(dir);
	if (n >= sizeof tmp)
		return -ENAMETOOLONG;
	memcpy(tmp, dir, n + 1);
	long uid = mt_sys(SYS_geteuid, 0, 0, 0, 0, 0, 0);
	struct stat st;
	for (size_t i = 1; i <= n; i++) {
		if (tmp[i] != '/' && tmp[i] != 0)
			continue;
		char c = tmp[i];
		tmp[i] = 0;
		long r = mt_sys(SYS_mkdir, tmp, DIR_MODE, 0, 0, 0, 0);
		if (r < 0 && r != -EEXIST)
			return r;
		if (mt_sys(SYS_lstat, tmp, &st, 0, 0, 0, 0))
			return -ENOENT;
		if (S_ISLNK(st.st_mode) && (long)st.st_uid != uid && st.st_uid != 0)
			return -EPERM;
		tmp[i] = c;
	}
	long dfd = mt_sys(SYS_open, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0, 0);
	if (dfd < 0)
		return dfd;
	if (mt_sys(SYS_fstat, dfd, &st, 0, 0, 0, 0) ||
	    ((long)st.st_uid != uid && (uid == 0 || st.st_uid != 0))) {
		mt_sys(SYS_close, dfd, 0, 0, 0, 0, 0);
		return -EPERM;
	}
	return dfd;
}

/* The file's name within the directory (path is <out>/<name>). */
static const char *
base(const char *p) {
	const char *s = p, *slash = NULL;
	for (; *s; s++)
		if (*s == '/')
			slash = s;
	return slash ? slash + 1 : p;
}

static int
ours(int f) {
	struct stat st;
	/* st_nlink 0: deleted under us (the directory removed mid-run):
	 * make it again rather than write into an unreachable file */
	return mt_sys(SYS_fstat, f, &st, 0, 0, 0, 0) == 0 && (uint64_t)st.st_dev == file_dev &&
	       (uint64_t)st.st_ino == file_ino && st.st_nlink > 0;
}

/* Open path for appending if it is still our file (the same inode, not a
 * link: O_NOFOLLOW); -ESTALE when it is not (gone, another file, a link),
 * else -errno (no descriptor free, no access: the file is still ours). */
static long
reopen_ours(long dfd) {
	long r = mt_sys(SYS_openat, dfd, base(path), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0, 0, 0);
	if (r == -ENOENT || r == -ELOOP)
		return -ESTALE;
	if (r < 0)
		return r;
	struct stat st;
	if (mt_sys(SYS_fstat, r, &st, 0, 0, 0, 0) || (uint64_t)st.st_dev != file_dev ||
	    (uint64_t)st.st_ino != file_ino || st.st_nlink == 0) {
		mt_sys(SYS_close, r, 0, 0, 0, 0, 0);
		return -ESTALE;
	}
	return r;
}

/* Make a new file: never through a link and never over an existing file
 * (O_EXCL), taking the next free ".x<N>" name when the name is taken. */
static long
create_new(long dfd) {
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC;
	long r = mt_sys(SYS_openat, dfd, base(path), flags, FILE_MODE, 0, 0);
	for (unsigned x = path_x + 1; r == -EEXIST && x < path_x + 1000; x++) {
		make_path_x(x);
		r = mt_sys(SYS_openat, dfd, base(path), flags, FILE_MODE, 0, 0);
	}
	return r;
}

int
mt_file_ensure(int *fresh, int *reopened) {
	*fresh = *reopened = 0;
	if (fd >= 0 && ours(fd))
		return 0;
	fd = -1; /* not ours any more (if it was): never written again */
	mt_fdio_guard(-1, 0, 0);
	int again = released; /* our own close: the same file, nothing lost */
	released = 0;
	make_path_x(opened_once ? path_x : 0);
	/* room above the program's descriptors for the directory's and the
	 * file's (a program at its limit still has it all, and ours too) */
	struct mt_fdroom room;
	struct stat named;
	mt_fdroom_enter(&room);
	long dfd = open_dir(mt_cfg.out);
	int err = dfd < 0 ? (int)-dfd : 0;
	long r = -ENOENT;
	if (!err) {
		/* The first open of this process image makes a new file: when
		 * the name is taken (an exec'd image keeps its pid; a pid
		 * reused in the same directory) it takes the next free
		 * ".x<N>" name instead.  A later open appends to it only if
		 * it is still the same file; a file deleted under us is made
		 * again, never followed through a link planted at its name. */
		r = opened_once ? reopen_ours(dfd) : -ESTALE;
		if (r == -ESTALE) {
			again = 0;
			r = create_new(dfd);
		}
		err = r < 0 ? (int)-r : 0;
		/* the file's identity by its name, not by the descriptor: a
		 * program that closes descriptors and takes their numbers
		 * could have made r its own file by now (below) */
		if (!err && mt_sys(SYS_newfstatat, dfd, base(path), &named, AT_SYMLINK_NOFOLLOW, 0, 0))
			err = ESTALE;
		mt_sys(SYS_close, dfd, 0, 0, 0, 0, 0);
	}
	/* high, O_CLOEXEC: the program's own opens start at 3 as without us */
	if (!err) {
		r = mt_fd_high_in(r, &room);
		keep = hold || !room.cur || room.cur > MT_FDROOM_MAX || (uint64_t)r >= room.cur;
	}
	mt_fdroom_leave(&room);
	if (err) {
		if (!open_failed && err == EPERM)
			mt_warn("%s (or a link on its path) belongs to another user: not writing "
				"there (the program runs on; set MEMTALLY_OUT to a directory of yours)",
				mt_cfg.out);
		else if (!open_failed)
			mt_warn("cannot write %s (errno %d); the program runs "
				"on, snapshots are lost until it can",
				path, err);
		open_failed = 1;
		return err;
	}
	struct stat st;
	if (mt_sys(SYS_fstat, r, &st, 0, 0, 0, 0))
		return EIO; /* not open: nothing of ours to close */
	if (st.st_dev != named.st_dev || st.st_ino != named.st_ino) {
		/* the number is the program's now (it closed ours and took
		 * it): left alone, never closed; this snapshot is dropped,
		 * counted, and the next opens the file again */
		return ESTALE;
	}
	fd = (int)r;
	file_dev = (uint64_t)st.st_dev;
	file_ino = (uint64_t)st.st_ino;
	mt_fdio_guard(fd, file_dev, file_ino);
	opened_once = 1;
	*fresh = st.st_size == 0;
	*reopened = !again || *fresh;
	return 0;
}

void
mt_file_release(void) {
	if (fd < 0 || keep)
		return;
	mt_fdio_guard(-1, 0, 0);
	mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
	fd = -1;
	released = 1;
}

void
mt_file_hold(void) {
	hold = keep = 1;
}

int
mt_file_made(void) {
	return opened_once;
}

int
mt_file_fd(void) {
	return __atomic_load_n(&fd, __ATOMIC_RELAXED);
}

const char *
mt_file_path(void) {
	return path;
}

const char *
mt_file_describe(void) {
	make_path_x(opened_once ? path_x : 0);
	return path;
}

void
mt_file_close(void) {
	mt_fdio_guard(-1, 0, 0);
	if (fd >= 0)
		mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
	fd = -1;
}

void
mt_file_postfork_child(void) {
	mt_file_close();
	open_failed = 0;
	opened_once = 0;
	released = 0;
}

static long dump_create(long dfd, unsigned idx, char *dst, size_t n);

long
mt_file_dump_open(unsigned idx, char *dst, size_t n) {
	name(dst, n, ".oom%u.jsonl", idx); /* named even when it cannot be made */
	struct mt_fdroom room;
	mt_fdroom_enter(&room);
	long dfd = open_dir(mt_cfg.out), r = dfd;
	if (dfd >= 0) {
		r = mt_fd_high_in(dump_create(dfd, idx, dst, n), &room);
		mt_sys(SYS_close, dfd, 0, 0, 0, 0, 0);
	}
	mt_fdroom_leave(&room);
	return r;
}

static long
dump_create(long dfd, unsigned idx, char *dst, size_t n) {
	/* Never through a link planted at the (predictable) name, never over
	 * an earlier run's dump of the same pid: the next ".x<N>" instead. */
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	name(dst, n, ".oom%u.jsonl", idx);
	long r = mt_sys(SYS_openat, dfd, base(dst), flags, FILE_MODE, 0, 0);
	for (unsigned x = 1; r == -EEXIST && x < 1000; x++) {
		char fmt[32];
		struct mt_buf b;
		mt_buf_fixed(&b, fmt, sizeof fmt - 1);
		mt_buf_printf(&b, ".x%u.oom%%u.jsonl", x);
		fmt[b.len] = 0;
		name(dst, n, fmt, idx);
		r = mt_sys(SYS_openat, dfd, base(dst), flags, FILE_MODE, 0, 0);
	}
	return r;
}

/* Whether the file's filesystem has less free space than the floor
 * (MEMTALLY_DISK_FLOOR, at least 5% of the filesystem): the program's own
 * writes must not find the disk full because of us.  Said once (a warning:
 * into the file when space returns, and memtally run's summary), and again
 * after each return of space. */
int
mt_file_below_floor(void) {
	static int was; /* the last look found it below */
	struct statfs sf;
	if (!mt_cfg.disk_floor || mt_sys(SYS_fstatfs, fd, &sf, 0, 0, 0, 0))
		return 0;
	uint64_t unit = (uint64_t)(sf.f_frsize > 0 ? sf.f_frsize : sf.f_bsize);
	uint64_t avail = (uint64_t)sf.f_bavail * unit, floor = (uint64_t)sf.f_blocks * unit / 20;
	if (floor < mt_cfg.disk_floor)
		floor = mt_cfg.disk_floor;
	int below = avail < floor;
	if (below && !was)
		mt_warn("the output filesystem has %lu MiB free, below the floor of %lu MiB "
			"(MEMTALLY_DISK_FLOOR, or 5%% of its size): snapshots are not written "
			"until space returns", (unsigned long)(avail >> 20), (unsigned long)(floor >> 20));
	was = below;
	return below;
}
