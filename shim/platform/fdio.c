/*
 * fdio.c — checked operations on the shim's own file (fdio.h).
 */
#include "platform/glue.h"
#include "platform/fdio.h"
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static struct {
	int fd;
	uint64_t dev, ino;
} G = {-1, 0, 0};
/* The file's end as our own writes left it (-1: unknown): the shim is the
 * file's only writer (O_APPEND; a fork child or an exec'd image writes a
 * file of its own), so a seek to the end after a write we made needs no
 * operation, and no child. */
static long known_end = -1;
/* the child's stack: one caller at a time (fdio.h) */
#define CHILD_STACK (16 << 10)
static char *child_stack;
static int no_child;

void
mt_fdio_no_child(void) {
	no_child = 1;
}

void
mt_fdio_guard(int fd, uint64_t dev, uint64_t ino) {
	G.dev = dev;
	G.ino = ino;
	known_end = -1;
	__atomic_store_n(&G.fd, fd, __ATOMIC_RELEASE);
}

int
mt_fdio_guarded(int fd) {
	return fd >= 0 && fd == __atomic_load_n(&G.fd, __ATOMIC_ACQUIRE);
}

struct job {
	int fd, op;
	const char *p;
	size_t n;
	long off;
	uint64_t dev, ino;
	long ret;
};

/* The check and the operation; raw system calls only (in the child it
 * runs with our thread's TLS: nothing may touch it, errno included). */
static long
run(struct job *j, int check) {
	struct stat st;
	if (check && (mt_sys(SYS_fstat, j->fd, &st, 0, 0, 0, 0) || (uint64_t)st.st_dev != j->dev ||
		      (uint64_t)st.st_ino != j->ino || st.st_nlink == 0 || !S_ISREG(st.st_mode)))
		return -ESTALE;
	switch (j->op) {
	case MT_IO_SEEK_END:
		return mt_sys(SYS_lseek, j->fd, 0, 2 /* SEEK_END */, 0, 0, 0);
	case MT_IO_TRUNCATE:
		return mt_sys(SYS_ftruncate, j->fd, j->off, 0, 0, 0, 0);
	default:
		for (const char *p = j->p; j->n;) {
			long r = mt_sys(SYS_write, j->fd, p, j->n, 0, 0, 0);
			if (r == -EINTR)
				continue;
			if (r < 0)
				return r;
			if (r == 0)
				return -EIO;
			p += r;
			j->n -= (size_t)r;
		}
		return 0;
	}
}

static int
child(void *arg) {
	struct job *j = arg;
	j->ret = run(j, 1);
	return 0;
}

/* Whether fd lies where the program could be handed its number: below
 * its soft RLIMIT_NOFILE now. */
static int
reachable(int fd) {
	struct {
		uint64_t cur, max;
	} l;
	if (mt_sys(SYS_prlimit64, 0, 7 /* RLIMIT_NOFILE */, NULL, &l, 0, 0))
		return 1;
	return (uint64_t)fd < l.cur;
}

static long
isolated_op(struct job *j) {
	int fd = j->fd;
	if (no_child || !reachable(fd))
		return run(j, 1);
	if (!child_stack) {
		child_stack = mt_sys_mmap(CHILD_STACK);
		if (!child_stack)
			return run(j, 1); /* no memory: checked, not isolated */
	}
	int saved = errno;
	/* every signal blocked in the child (a copy of our mask at the
	 * clone): a signal to the process group (the terminal's ^C) must
	 * not run the program's handler in it */
	uint64_t all = ~0ull, old;
	mt_sys(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof all, 0, 0);
	long pid = clone(child, child_stack + CHILD_STACK, CLONE_VM, j);
	mt_sys(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old, 0, 0);
	errno = saved;
	if (pid < 0) /* no process to spare (pids.max, seccomp) */
		return run(j, 1);
	/* reaped here (a __WCLONE child: the program's waitpid never sees it);
	 * a handled signal interrupts the wait, as any system call */
	long r;
	do
		r = mt_sys(SYS_wait4, pid, NULL, __WCLONE, NULL, 0, 0);
	while (r == -EINTR);
	return r == pid || r == -ECHILD ? __atomic_load_n(&j->ret, __ATOMIC_ACQUIRE) : -EIO;
}

long
mt_fdio(int fd, int op, const void *p, size_t n, long off) {
	struct job j = {fd, op, p, n, off, G.dev, G.ino, -ESTALE};
	if (!mt_fdio_guarded(fd) || !G.ino)
		return run(&j, 0); /* not the file (a dump's) */
	if (op == MT_IO_SEEK_END && known_end >= 0)
		return known_end;
	long r = isolated_op(&j);
	if (op == MT_IO_SEEK_END)
		known_end = r >= 0 ? r : -1;
	else if (op == MT_IO_TRUNCATE)
		known_end = r == 0 ? off : -1;
	else
		known_end = r == 0 && known_end >= 0 ? known_end + (long)n : -1;
	return r;
}

