/*
 * glue.h — the platform layer's core: every libc and kernel detail the shim
 * depends on (raw syscalls, mappings, atomics, locks, clocks, hashing).
 * The loader's part is in dl.h; the one-recording-thread protocol that the
 * tables' plain updates rest on is the state layer's (state/solo.h).
 *
 * THE SHIM'S TWO RULES (repeated in every shim header):
 *   1. It never calls malloc (or anything that may: stdio, getenv, dlerror,
 *      pthread_getattr_np, ...). Its memory comes from mmap via raw syscalls.
 *   2. Any function may run inside malloc, in any thread, before main, in a
 *      forked child, or while the program is exiting.
 * Contracts end with a tag: "Never allocates.", "Async-signal-safe." or
 * "Takes <lock>."
 *
 * THE LAYERS (scripts/layers.py checks them from the objects: a file calls
 * only files of a lower layer, or earlier ones of its own folder in the
 * order listed there; entry points never call each other):
 *   platform/  this header (syscalls, mappings, atomics, locks, clocks), dl
 *              (the loader, the real dlsym), buf (formatting into fixed
 *              buffers, warnings), cudaroutes (the CUDA driver's entry
 *              points and their lookups), tmem (each thread's tables, in
 *              memory of the shim's own, not TLS), config (the options).
 *              Calls no other layer.
 *   state/     what the shim knows: stack ids, call-site figures, live
 *              blocks and mappings, events, requests (sites.h has the table).
 *   capture/   from an allocation to a call site: stack walkers, Python
 *              frames, sampling and charging (charge.h).
 *   output/    what leaves the process: the file, its records, dumps, the
 *              /proc and cgroup figures (snapshot.h).
 *   entry/     the exported symbols the program calls into (interpose.h).
 *   life.c     constructor, writer thread, fork, exit: the modules' hooks.
 * format.h (shared with the command) and memtally.h (the public C API)
 * stay at the top of shim/.
 */
#ifndef MT_GLUE_H
#define MT_GLUE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include <time.h>

#define MT_EXPORT __attribute__((visibility("default")))
#define MT_HIDDEN __attribute__((visibility("hidden")))
#define MT_TLS __thread __attribute__((tls_model("initial-exec")))
#define MT_LIKELY(x) __builtin_expect(!!(x), 1)
#define MT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MT_NOINLINE __attribute__((noinline))

/* Assertions trap without stdio (musl's a_crash). */
#define mt_assert(x)                                                           \
	do {                                                                   \
		if (MT_UNLIKELY(!(x)))                                         \
			__builtin_trap();                                      \
	} while (0)

/* Raw syscalls: never interposed, never allocate, errno untouched.  They
 * return -errno on failure (the kernel convention). Async-signal-safe. */
long mt_syscall6(long n, long a, long b, long c, long d, long e, long f);
#define mt_sys(n, a, b, c, d, e, f)                                            \
	mt_syscall6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), \
		    (long)(f))

#ifdef MT_TSAN
/* Unit tests under ThreadSanitizer: memory through libc, which TSan
 * intercepts (raw munmap + mmap reusing an address reads to it as a race). */
#include <sys/mman.h>
static inline void *
mt_sys_mmap(size_t len) {
	void *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}
static inline void
mt_sys_munmap(void *p, size_t len) {
	munmap(p, len);
}
static inline void *
mt_sys_mremap(void *p, size_t len, size_t nlen) {
	void *q = mremap(p, len, nlen, MREMAP_MAYMOVE);
	return q == MAP_FAILED ? NULL : q;
}
static inline void *
mt_sys_reserve(size_t len) {
	void *p = mmap(0, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}
static inline int
mt_sys_commit(void *p, size_t len) {
	return mprotect(p, len, PROT_READ | PROT_WRITE) ? -errno : 0;
}
static inline void
mt_sys_decommit(void *p, size_t len) {
	mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}
#else
static inline void *
mt_sys_mmap(size_t len) {
	long r = mt_sys(SYS_mmap, 0, len, 3 /* RW */, 0x22 /* PRIVATE|ANON */,
			-1, 0);
	return (r < 0 && r > -4096) ? NULL : (void *)r;
}

static inline void
mt_sys_munmap(void *p, size_t len) {
	mt_sys(SYS_munmap, p, len, 0, 0, 0, 0);
}

/* A mapping of len bytes grown (or shrunk) to nlen, moved if it must be:
 * its pages go with it (no copy, no faults), the new ones are zero.
 * NULL when it cannot (the old mapping stays). */
static inline void *
mt_sys_mremap(void *p, size_t len, size_t nlen) {
	long r = mt_sys(SYS_mremap, p, len, nlen, 1 /* MREMAP_MAYMOVE */, 0, 0);
	return (r < 0 && r > -4096) ? NULL : (void *)r;
}

/* Address space without memory (PROT_NONE, not counted against the
 * commit limit), made usable a piece at a time (mt_sys_commit: 0 or
 * -errno) and given back the same way (mt_sys_decommit: its pages freed,
 * PROT_NONE again). */
static inline void *
mt_sys_reserve(size_t len) {
	long r = mt_sys(SYS_mmap, 0, len, 0 /* PROT_NONE */,
			0x4022 /* PRIVATE|ANON|NORESERVE */, -1, 0);
	return (r < 0 && r > -4096) ? NULL : (void *)r;
}

static inline int
mt_sys_commit(void *p, size_t len) {
	return (int)mt_sys(SYS_mprotect, p, len, 3 /* RW */, 0, 0, 0);
}

static inline void
mt_sys_decommit(void *p, size_t len) {
	mt_sys(SYS_mmap, p, len, 0, 0x4032 /* PRIVATE|ANON|NORESERVE|FIXED */, -1, 0);
}
#endif

/* Relaxed atomics on plain integers: the tables are read racily by the
 * snapshot thread, which tolerates a torn view between fields. */
#define mt_load(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define mt_store(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define mt_add(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)
#define mt_cas(p, e, v)                                                        \
	__atomic_compare_exchange_n((p), (e), (v), 0, __ATOMIC_ACQ_REL,        \
				    __ATOMIC_ACQUIRE)

/* Raise *peak to live if live is higher (a high-water mark many threads
 * raise at once: the compare-and-swap retries only while live is higher).
 * Returns whether this call raised it. */
static inline int
mt_raise_peak(int64_t *peak, int64_t live) {
	int64_t p = __atomic_load_n(peak, __ATOMIC_RELAXED);
	while (live > p)
		if (__atomic_compare_exchange_n(peak, &p, live, 1, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return 1;
	return 0;
}

/* A spin lock that yields: held only for a few hundred instructions (a
 * table probe, a rehash), never across a call out of the shim.  fork
 * safety: mt_prefork takes every lock, the child re-initialises them.
 *
 * mt_locks_held counts the shim locks the calling thread holds or is
 * taking (raised before the attempt, lowered after the release, so a
 * signal that lands in between reads it high, never low): a signal
 * handler that would write a snapshot (entry/signals.c) writes only when
 * it is 0, since a snapshot may need a lock the interrupted code holds.
 * When it is not, the handler leaves mt_locks_after (a death: write the
 * final snapshot, then die) for the thread's release of its last lock
 * to run: the locks are held for a few hundred instructions, a snapshot
 * write's for a few ms.  A fork child's one thread holds none and runs
 * nothing left (life.c sets both to 0). */
extern MT_TLS int mt_locks_held;
extern MT_TLS void (*mt_locks_after)(void);
/* mt_unlock's call of mt_locks_after, out of line (rare) */
void mt_locks_released(void);

/* A lock given back (or not taken): uncounted, and the thread's release
 * of its last lock runs what a handler left (mt_locks_after). */
static inline void
mt_locks_uncount(void) {
	mt_locks_held--;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (MT_UNLIKELY(mt_locks_after != NULL) && !mt_locks_held)
		mt_locks_released();
}

typedef struct {
	int v; /* 0 free, 1 held */
} mt_lock_t;

static inline void
mt_lock(mt_lock_t *l) {
	int spins = 0;
	mt_locks_held++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* counted before taken */
	for (;;) {
		int e = 0;
		if (!__atomic_load_n(&l->v, __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&l->v, &e, 1, 0,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return;
		if (++spins > 64) {
			mt_sys(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
			spins = 0;
		} else {
			__builtin_ia32_pause();
		}
	}
}

static inline int
mt_trylock(mt_lock_t *l) {
	int e = 0;
	mt_locks_held++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__atomic_compare_exchange_n(&l->v, &e, 1, 0, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mt_locks_uncount();
	return 0;
}

static inline void
mt_unlock(mt_lock_t *l) {
	__atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* released before uncounted */
	mt_locks_uncount();
}

/* Monotonic and wall clocks through the vDSO (no syscall, no allocation). */
uint64_t mt_now_ns(void);
uint64_t mt_wall_ns(void);
/* The calling thread's CPU time (a syscall; errno kept). */
uint64_t mt_thread_cpu_ns(void);
/* The process's start on both clocks: set by the constructor and in a
 * fork child (mt_clock_start), read by every record's times. */
extern uint64_t mt_start_mono_ns, mt_start_wall_ns;
void mt_clock_start(void);
/* The natural logarithm of x > 0 (finite), to a unit or two in the last
 * place: the sampler's draws, without libm (900 KB of a small program's
 * address space for two functions). */
double mt_log(double x);
/* e^x - 1, exact near 0 as libm's (the sampler's probabilities). */
double mt_expm1(double x);
/* The value of the "step" mark (marks.c writes it, call-site peaks read
 * it); -1 before the first. */
extern int32_t mt_step_now;
/* Milliseconds since the start at monotonic time now_ns. */
static inline uint64_t
mt_ms_at(uint64_t now_ns) {
	return now_ns > mt_start_mono_ns ? (now_ns - mt_start_mono_ns) / 1000000u : 0;
}
/* Milliseconds since the start, from the coarse clock through the vDSO
 * (~8 ns; inline: the hot path stamps every tracked block with it). */
static inline uint64_t
mt_ms_since_start(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return mt_ms_at((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

/* Milliseconds since the start from the clock snapshots' elapsed_ms use
 * (CLOCK_MONOTONIC, ~20 ns): for the rare stamps that are compared with
 * each other at a millisecond, a site's peak and the phases' spans, where
 * the coarse clock's tick (4 ms at HZ=250) put a spike made inside a
 * phase before the phase's start. */
static inline uint64_t
mt_ms_since_start_fine(void) {
	return mt_ms_at(mt_now_ns());
}

/* One step of a 64-bit hash: multiply, fold the high half down (the
 * stack and Python-walk hashes chain it a value at a time). */
static inline uint64_t
mt_mix64(uint64_t h) {
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 32);
}

/* Whether the call a return address returns from lies in the text
 * [lo, hi): pc - 1 does (a call that ends a function returns past it).
 * Never true for lo == hi. */
static inline int
mt_pc_in(uintptr_t pc, uintptr_t lo, uintptr_t hi) {
	return pc - (lo + 1) < hi - lo;
}

/* The index of the first return address in pcs[0..n) for which mt_pc_in
 * holds, n when none.  Four frames a step, one branch for the four: most
 * stacks are scanned whole (the interpreter loop, the loader). */
static inline int
mt_pcs_find(const uintptr_t *pcs, int n, uintptr_t lo, uintptr_t hi) {
	int k = 0;
	for (; k + 4 <= n; k += 4)
		if (mt_pc_in(pcs[k], lo, hi) | mt_pc_in(pcs[k + 1], lo, hi) |
		    mt_pc_in(pcs[k + 2], lo, hi) | mt_pc_in(pcs[k + 3], lo, hi))
			break;
	while (k < n && !mt_pc_in(pcs[k], lo, hi))
		k++;
	return k;
}

/* Copies up to n bytes of this process's memory at src into dst without
 * touching it (process_vm_readv): memory unmapped meanwhile (an object
 * dlclose is unloading) gives a short count, never a fault.  The bytes
 * copied, or -errno (a seccomp filter may refuse the call: -EPERM,
 * -ENOSYS).  Async-signal-safe; never allocates. */
long mt_safe_read(void *dst, const void *src, size_t n);
/* A small file (/proc, /sys) read whole into buf, NUL-terminated (at most
 * cap - 1 bytes).  Its length, or -errno.  Never allocates. */
long mt_read_file(const char *path, char *buf, size_t cap);
/* The descriptors the shim keeps (its file, libunwind's pipe) and the
 * ones it opens for a moment (dumps, their directory) stay out of the
 * program's range.  A program whose soft RLIMIT_NOFILE is at most
 * MT_FDROOM_MAX (the limits that programs run into) has it raised by
 * MT_FDROOM for the moment of the open (mt_fdroom_enter, as far as the
 * hard limit allows, or with the hard limit when the process may raise
 * it: CAP_SYS_RESOURCE) and put back (mt_fdroom_leave; a limit the program
 * set meanwhile is kept); the descriptor is moved to the old soft limit or
 * above it (mt_fd_high_in), where the program's own opens never reach: its
 * first open is 3 and it opens as many as without the shim, even when it
 * sits at its limit when the shim opens.  Without that room (a larger
 * limit, or soft = hard for an unprivileged process) it is moved to the
 * top of the program's range (the lower of 900 and the limit - 8), and
 * counts against it.  What a program can see: getrlimit in another thread
 * during the moment, or a child forked then, gets the raised limit.
 * O_CLOEXEC either way.  Async-signal-safe, never allocate. */
#define MT_FDROOM 16
#define MT_FDROOM_MAX 4096
struct mt_fdroom {
	uint64_t cur, max;       /* the program's limit (cur 0: unknown) */
	uint64_t up_cur, up_max; /* as raised */
	int on;                  /* raised */
};
void mt_fdroom_enter(struct mt_fdroom *r);
void mt_fdroom_leave(struct mt_fdroom *r);
/* fd moved out of the program's range (within r, entered), the old one
 * closed; fd itself when it cannot be moved. */
long mt_fd_high_in(long fd, const struct mt_fdroom *r);
/* The same, in a room of its own. */
long mt_fd_high(long fd);

#endif
