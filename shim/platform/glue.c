/*
 * glue.c — raw syscalls and clocks.  The syscall stub leaves errno alone,
 * so hooks can call the kernel without disturbing what the program sees.
 */
#include "platform/glue.h"
#include <sys/stat.h>
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

/* The calling thread's CPU time: a syscall (the vDSO has no such clock),
 * errno kept. */
uint64_t
mt_thread_cpu_ns(void) {
	int e = errno;
	struct timespec ts = {0};
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	errno = e;
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
MT_TLS void (*mt_locks_after)(void);

void
mt_locks_released(void) {
	void (*fn)(void) = mt_locks_after;
	mt_locks_after = NULL;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (fn)
		fn();
}

void
mt_clock_start(void) {
	mt_start_mono_ns = mt_now_ns();
	mt_start_wall_ns = mt_wall_ns();
}


double
mt_log(double x) {
	union {
		double d;
		uint64_t u;
	} v = {x};
	int e = 0;
	if (!(v.u >> 52)) { /* subnormal: scaled into the normal range */
		v.d = x * 18014398509481984.0; /* 2^54 */
		e = -54;
	}
	e += (int)(v.u >> 52 & 0x7ff) - 1023;
	v.u = (v.u & ((1ull << 52) - 1)) | 1023ull << 52; /* m in [1, 2) */
	double m = v.d;
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	/* log m = 2 atanh s, s = (m - 1) / (m + 1), |s| <= 0.1716: the
	 * series to s^23 (its next term is below 1e-18 of the sum) */
	double s = (m - 1) / (m + 1), z = s * s, t = 1.0 / 23;
	for (int k = 21; k >= 1; k -= 2)
		t = 1.0 / k + z * t;
	return (double)e * 0.6931471805599453 + 2 * s * t;
}

double
mt_expm1(double x) {
	if (x > -0.5 && x < 0.5) { /* x + x^2/2! + ... + x^19/19! */
		double t = 1;
		for (int k = 19; k >= 2; k--)
			t = 1 + x * t / k;
		return x * t;
	}
	if (x < -746)
		return -1;
	if (x > 709.7)
		return __builtin_inf();
	/* e^x = 2^k e^r, x = k ln 2 + r, |r| <= ln 2 / 2 (ln 2 in two parts:
	 * k * hi is exact) */
	long k = (long)(x * 1.4426950408889634 + (x < 0 ? -0.5 : 0.5));
	double r = x - (double)k * 6.93147180369123816490e-01 - (double)k * 1.90821492927058770002e-10;
	double t = 1;
	for (int j = 17; j >= 1; j--)
		t = 1 + r * t / j;
	union {
		double d;
		uint64_t u;
	} p;
	long half = k / 2; /* 2^k as two factors: each a normal double */
	p.u = (uint64_t)(half + 1023) << 52;
	t *= p.d;
	p.u = (uint64_t)(k - half + 1023) << 52;
	return t * p.d - 1;
}

struct nofile {
	uint64_t cur, max;
};

static int
nofile(const struct nofile *set, struct nofile *old) {
	return (int)mt_sys(SYS_prlimit64, 0, 7 /* RLIMIT_NOFILE */, set, old, 0, 0);
}

void
mt_fdroom_enter(struct mt_fdroom *r) {
	struct nofile l, up, was;
	r->cur = r->max = 0;
	r->on = 0;
	if (nofile(NULL, &l))
		return;
	r->cur = l.cur;
	r->max = l.max;
	if (l.cur < 16 || l.cur > MT_FDROOM_MAX)
		return;
	/* the soft limit up; the hard one with it when it is the soft one
	 * (only a privileged process may: CAP_SYS_RESOURCE); else as far as
	 * the hard one allows */
	up.cur = l.cur + MT_FDROOM;
	up.max = l.max > up.cur ? l.max : up.cur;
	int err = nofile(&up, &was);
	if (err && up.max != l.max && l.max > l.cur) {
		up.cur = l.max < up.cur ? l.max : up.cur;
		up.max = l.max;
		err = nofile(&up, &was);
	}
	if (err)
		return;
	if (was.cur != l.cur || was.max != l.max) {
		/* the program changed it between the two calls: its own */
		nofile(&was, NULL);
		return;
	}
	r->up_cur = up.cur;
	r->up_max = up.max;
	r->on = 1;
}

void
mt_fdroom_leave(struct mt_fdroom *r) {
	if (!r->on)
		return;
	r->on = 0;
	struct nofile back = {r->cur, r->max}, was;
	if (nofile(&back, &was))
		return;
	if (was.cur != r->up_cur || was.max != r->up_max)
		nofile(&was, NULL); /* the program set its own meanwhile: kept */
}

long
mt_fd_high_in(long fd, const struct mt_fdroom *r) {
	if (fd < 0 || !r->cur)
		return fd;
	uint64_t from;
	if (r->on)
		from = r->cur; /* past the program's own range */
	else if (r->cur < 16)
		return fd;
	else
		from = r->cur < 908 ? r->cur - 8 : 900;
	if ((uint64_t)fd >= from)
		return fd;
	long hi = mt_sys(SYS_fcntl, fd, 1030 /* F_DUPFD_CLOEXEC */, from, 0, 0, 0);
	if (hi < 0)
		return fd;
	/* the low one closed only while it is still the same file as the
	 * high one: a program that closes descriptors it did not open may
	 * have taken the number for a file of its own meanwhile (the two
	 * calls are not one step: a window of a few hundred ns, once per
	 * open of ours, is left) */
	struct stat a, b;
	if (!mt_sys(SYS_fstat, fd, &a, 0, 0, 0, 0) && !mt_sys(SYS_fstat, hi, &b, 0, 0, 0, 0) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
	return hi;
}

long
mt_fd_high(long fd) {
	if (fd < 0)
		return fd;
	struct mt_fdroom r;
	mt_fdroom_enter(&r);
	fd = mt_fd_high_in(fd, &r);
	mt_fdroom_leave(&r);
	return fd;
}

long
mt_safe_read(void *dst, const void *src, size_t n) {
	struct {
		const void *base;
		size_t len;
	} local = {dst, n}, remote = {src, n};
	return mt_sys(SYS_process_vm_readv, mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0), &local, 1,
		      &remote, 1, 0);
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
