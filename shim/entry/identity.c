/*
 * identity.c — the calls that change who the process is, and its first
 * thread: the set*id family, setgroups and initgroups (glibc runs them on
 * every thread of the process and aborts when one thread's call fails),
 * and unshare/setns into a user namespace (refused to a process with more
 * than one thread).  The writer thread steps aside for each (stopped and
 * joined, started again after, in the new identity), so a program that
 * changes identity behaves as it does without the shim (writer.h).  A
 * program's first pthread_create starts the writer too: from then on the
 * process has threads anyway, and a snapshot asked by a signal is taken
 * without waiting for an allocation.  Before each, the output file is
 * opened and kept (snapshot.h mt_snapshot_hold): in the new identity it
 * may not be opened again.  errno is the real call's.
 */
#include "platform/glue.h"
#include "platform/dl.h"
#include "output/snapshot.h"
#include "output/writer.h"
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <unistd.h>

#define REAL(name) ((__typeof__(&name))mt_dlsym(RTLD_NEXT, #name))

/* r = the real call, with the writer parked around it. */
#define PARKED(r, call)                                                        \
	do {                                                                   \
		mt_snapshot_hold();                                            \
		int was_ = mt_writer_park();                                   \
		r = call;                                                      \
		int e_ = errno;                                                \
		mt_writer_resume(was_);                                        \
		errno = e_;                                                    \
	} while (0)

#define ID1(name, T)                                                           \
	MT_EXPORT int name(T a) {                                              \
		int r;                                                         \
		PARKED(r, REAL(name)(a));                                      \
		return r;                                                      \
	}
#define ID2(name, T)                                                           \
	MT_EXPORT int name(T a, T b) {                                         \
		int r;                                                         \
		PARKED(r, REAL(name)(a, b));                                   \
		return r;                                                      \
	}
#define ID3(name, T)                                                           \
	MT_EXPORT int name(T a, T b, T c) {                                    \
		int r;                                                         \
		PARKED(r, REAL(name)(a, b, c));                                \
		return r;                                                      \
	}

ID1(setuid, uid_t)
ID1(setgid, gid_t)
ID1(seteuid, uid_t)
ID1(setegid, gid_t)
ID2(setreuid, uid_t)
ID2(setregid, gid_t)
ID3(setresuid, uid_t)
ID3(setresgid, gid_t)

MT_EXPORT int
setgroups(size_t n, const gid_t *list) {
	int r;
	PARKED(r, REAL(setgroups)(n, list));
	return r;
}

MT_EXPORT int
initgroups(const char *user, gid_t group) {
	int r; /* glibc's calls setgroups inside, not through here */
	PARKED(r, REAL(initgroups)(user, group));
	return r;
}

/* The process's threads, as the kernel counts them (/proc/self/status):
 * 0 when it cannot be read. */
static long
threads_now(void) {
	char st[4096];
	if (mt_read_file("/proc/self/status", st, sizeof st) <= 0)
		return 0;
	const char *t = strstr(st, "\nThreads:");
	return t ? strtol(t + 10, NULL, 10) : 0;
}

/* A user namespace is refused while the process has a second thread, and
 * the writer thread, joined, is still counted until the kernel has
 * finished its exit (pthread_join returns when it clears its tid, just
 * before): unshare failed with EINVAL once in a while under load.  So,
 * the writer joined, wait (at most 100 ms) until the kernel counts one
 * thread fewer than before. */
#define NS_PARKED(r, call)                                                     	do {                                                                   		mt_snapshot_hold();                                            		long n0_ = threads_now();                                      		int was_ = mt_writer_park();                                   		for (int i_ = 0; was_ && n0_ > 1 && i_ < 100 && threads_now() >= n0_; i_++) { 			struct timespec ts_ = {0, 1000000};                    			mt_sys(SYS_nanosleep, &ts_, NULL, 0, 0, 0, 0);         		}                                                              		r = call;                                                      		int e_ = errno;                                                		mt_writer_resume(was_);                                        		errno = e_;                                                    	} while (0)

MT_EXPORT int
unshare(int flags) {
	if (!(flags & CLONE_NEWUSER))
		return REAL(unshare)(flags);
	int r;
	NS_PARKED(r, REAL(unshare)(flags));
	return r;
}

MT_EXPORT int
setns(int fd, int nstype) {
	if (nstype && !(nstype & CLONE_NEWUSER))
		return REAL(setns)(fd, nstype);
	int r;
	NS_PARKED(r, REAL(setns)(fd, nstype));
	return r;
}

MT_EXPORT int
pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
	mt_writer_start();
	return REAL(pthread_create)(t, a, fn, arg);
}
