/*
 * exec.c — the exit and exec hooks (exec.h).
 */
#include "platform/glue.h"
#include "platform/config.h"
#include "platform/dl.h"
#include "platform/buf.h"
#include "capture/charge.h"
#include "capture/python.h"
#include "output/file.h"
#include "output/oom.h"
#include "output/snapshot.h"
#include "output/procstat.h"
#include "entry/exec.h"
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>

static long mt_pid; /* ours; a vfork child has another */
static int forked;   /* this image began as a fork child (not at exec) */

void
mt_exec_owner(long pid, int fork_child) {
	mt_pid = pid;
	forked = fork_child;
}

void
mt_exit_snapshot(void) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE))
		return;
	/* A vfork child shares our memory and must not write: its pid is
	 * not the one we recorded (fork children update it). */
	if (mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0) != mt_pid)
		return;
	mt_self.guard++;
	mt_py_exit_hold(); /* Python 3.10's daemon threads */
	if (mt_cfg.signal && mt_signal_pending(mt_cfg.signal))
		mt_warn("the snapshot signal (%d) was sent while the program blocked it: no "
			"snapshot was taken for it (MEMTALLY_SIGNAL names another signal; "
			"memtally_snapshot() asks from inside the program)", mt_cfg.signal);
	mt_snapshot_write("exit", NULL);
	mt_snapshot_close(); /* later writes are refused */
	if (mt_cfg.oom_render)
		mt_oom_render(1); /* dumps the writer has not rendered yet */
	mt_set_active(0);
	mt_self.guard--;
}

/* _exit and _Exit skip destructors: forked workers (Python's
 * multiprocessing, DataLoader workers) leave this way, and their exit
 * snapshot is still written.  The process then ends with exit_group, as
 * glibc's _exit does. */
MT_EXPORT void
_exit(int status) {
	mt_exit_snapshot();
	for (;;)
		mt_sys(SYS_exit_group, status, 0, 0, 0, 0, 0);
}

MT_EXPORT void
_Exit(int status) {
	_exit(status);
}

/* ---- exec ------------------------------------------------------------- */

/* exec replaces the image without running destructors: a program that
 * execs before its first snapshot left no file at all.  The exec family
 * writes an "exec" snapshot first, synchronously on the exec'ing thread
 * and allocation-free (as the exit one); a failed exec returns as it
 * would have, its errno its own, the file one snapshot longer.  A vfork
 * child (posix_spawn's, or the program's) has another pid and writes
 * nothing: it shares our memory, and its exec is not ours.  Nor does a
 * fork child that has no file yet: fork then exec (a shell running a
 * command) would leave a file per command for the moments between; the
 * image it runs writes its own.  glibc's
 * execl* and execv* reach the kernel through its internal __execve, not
 * through execve, so each is wrapped. */
static void
before_exec(void) {
	if (!__atomic_load_n(&mt_active, __ATOMIC_ACQUIRE) ||
	    mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0) != mt_pid || (forked && !mt_file_made()))
		return;
	int saved = errno;
	mt_self.guard++;
	mt_snapshot_write("exec", NULL);
	mt_self.guard--;
	errno = saved;
}

typedef int (*exec3_fn)(const char *, char *const[], char *const[]);
typedef int (*exec2_fn)(const char *, char *const[]);

#define REAL(type, name) ((type)mt_dlsym(RTLD_NEXT, name))

MT_EXPORT int
execve(const char *path, char *const argv[], char *const envp[]) {
	exec3_fn real = REAL(exec3_fn, "execve");
	before_exec();
	return real(path, argv, envp);
}

MT_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[]) {
	exec3_fn real = REAL(exec3_fn, "execvpe");
	before_exec();
	return real(file, argv, envp);
}

MT_EXPORT int
execv(const char *path, char *const argv[]) {
	exec2_fn real = REAL(exec2_fn, "execv");
	before_exec();
	return real(path, argv);
}

MT_EXPORT int
execvp(const char *file, char *const argv[]) {
	exec2_fn real = REAL(exec2_fn, "execvp");
	before_exec();
	return real(file, argv);
}

MT_EXPORT int
fexecve(int fd, char *const argv[], char *const envp[]) {
	int (*real)(int, char *const[], char *const[]) =
		(int (*)(int, char *const[], char *const[]))mt_dlsym(RTLD_NEXT, "fexecve");
	before_exec();
	return real(fd, argv, envp);
}

/* execl, execlp, execle: the arguments into an array on the stack (as
 * glibc's own do), then the v form; E2BIG where the kernel would say it. */
#define MAX_LIST 131072
#define LIST_ARGS(arg0)                                                         \
	size_t n = 1;                                                           \
	va_list ap;                                                             \
	va_start(ap, arg0);                                                     \
	while (va_arg(ap, char *) && n < MAX_LIST)                              \
		n++;                                                            \
	va_end(ap);                                                             \
	if (n >= MAX_LIST) {                                                    \
		errno = E2BIG;                                                  \
		return -1;                                                      \
	}                                                                       \
	char *argv[n + 1];                                                      \
	argv[0] = (char *)arg0;                                                 \
	va_start(ap, arg0);                                                     \
	for (size_t i = 1; i < n; i++)                                          \
		argv[i] = va_arg(ap, char *);                                   \
	argv[n] = va_arg(ap, char *); /* the NULL that ends the list */

MT_EXPORT int
execl(const char *path, const char *arg, ...) {
	LIST_ARGS(arg)
	va_end(ap);
	return execv(path, argv);
}

MT_EXPORT int
execlp(const char *file, const char *arg, ...) {
	LIST_ARGS(arg)
	va_end(ap);
	return execvp(file, argv);
}

MT_EXPORT int
execle(const char *path, const char *arg, ...) {
	LIST_ARGS(arg)
	char **envp = va_arg(ap, char **); /* after the NULL */
	va_end(ap);
	return execve(path, argv, envp);
}
