/*
 * glue.c — raw syscalls and clocks.  The syscall stub leaves errno alone,
 * so hooks can call the kernel without disturbing what the program sees.
 */
#include "platform/glue.h"
#include <time.h>

long
mt_syscall6(long n, long a, long b, long c, long d, long e, long f) {
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
			   "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* clock_gettime goes through the vDSO: no syscall, no allocation, and it
 * does not touch errno on success (it cannot fail for these clocks). */
uint64_t
mt_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
mt_wall_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The process's start (the constructor's, or a fork child's). */
uint64_t mt_start_mono_ns, mt_start_wall_ns;
int32_t mt_step_now = -1;
MT_TLS int mt_locks_held;

void
mt_clock_start(void) {
	mt_start_mono_ns = mt_now_ns();
	mt_start_wall_ns = mt_wall_ns();
}


long
mt_fd_high(long fd) {
	struct { uint64_t cur, max; } lim;
	if (fd < 0 || mt_sys(SYS_prlimit64, 0, 7 /* RLIMIT_NOFILE */, 0, &lim, 0, 0))
		return fd;
	uint64_t from = lim.cur < 908 ? lim.cur - 8 : 900;
	if (lim.cur < 16 || (uint64_t)fd >= from)
		return fd;
	long hi = mt_sys(SYS_fcntl, fd, 1030 /* F_DUPFD_CLOEXEC */, from, 0, 0, 0);
	if (hi < 0)
		return fd;
	mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
	return hi;
}

long
mt_read_file(const char *path, char *buf, size_t cap) {
	if (!cap)
		return -EINVAL;
	long f = mt_sys(SYS_openat, -100 /* AT_FDCWD */, path, 02000000 /* O_RDONLY|O_CLOEXEC */,
			0, 0, 0);
	if (f < 0)
		return f;
	size_t n = 0;
	while (n + 1 < cap) {
		long r = mt_sys(SYS_read, f, buf + n, cap - 1 - n, 0, 0, 0);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	mt_sys(SYS_close, f, 0, 0, 0, 0, 0);
	buf[n] = 0;
	return (long)n;
}
