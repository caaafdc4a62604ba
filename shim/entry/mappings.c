/*
 * mappings.c — the exported mapping entry points: mmap, mmap64, munmap,
 * mprotect and mremap (charged as mappings, capture/charge.h mt_map_*),
 * and pipe2 (libunwind's pipes moved out of the program's way).  The
 * malloc family is interpose.c's; both forward to platform/real.h's
 * functions, found on the first call of either.
 *
 * Safe from the first instruction, as interpose.c's hooks: before the
 * constructor and while dlsym is finding the real functions (a mapping
 * then goes to the kernel directly), inside the shim (the guard forwards
 * straight through).  errno is what the real function left.
 */
#include "platform/glue.h"
#include "platform/real.h"
#include "capture/charge.h"
#include "output/oom.h"
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>

/* ---- pipe2 ------------------------------------------------------------
 * libunwind checks addresses by writing a byte into a pipe it opens once
 * and keeps by number.  A program that closes every descriptor (a
 * daemon, close_range at start) and opens files of its own would be
 * handed those numbers, and libunwind would write into -- and close -- the
 * program's files.  Pipes opened from inside the shim (the guard is held
 * whenever libunwind runs) are therefore moved to high numbers, which a
 * program's own opens (always the lowest free number) do not reach; when
 * they are closed under it, libunwind's next check fails and it opens a
 * new pipe, through here again.  They are made in a room above the
 * program's limit (glue.h mt_fdroom_enter), so they are not taken from
 * it either.  Every other pipe2 is the kernel's. */
MT_EXPORT int
pipe2(int fds[2], int flags) {
	struct mt_fdroom room = {0};
	int ours = mt_self.guard;
	if (ours)
		mt_fdroom_enter(&room);
	long r = mt_sys(SYS_pipe2, fds, flags, 0, 0, 0, 0);
	if (ours) {
		for (int i = 0; i < 2 && r == 0; i++)
			fds[i] = (int)mt_fd_high_in(fds[i], &room);
		mt_fdroom_leave(&room);
	}
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return 0;
}

/* ---- mappings -------------------------------------------------------- */

static void *
sys_mmap(void *a, size_t len, int prot, int flags, int fd, off_t off) {
	long r = mt_sys(SYS_mmap, a, len, prot, flags, fd, off);
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return MAP_FAILED;
	}
	return (void *)r;
}

static void *
mmap_common(void *(*fn)(void *, size_t, int, int, int, off_t), void *a,
	    size_t len, int prot, int flags, int fd, off_t off) {
	if (!fn) /* before dlsym has answered: the kernel directly */
		fn = sys_mmap;
	if (!MT_RECORDING())
		return fn(a, len, prot, flags, fd, off);
	mt_self.guard = 1;
	void *p = fn(a, len, prot, flags, fd, off);
	if (p != MAP_FAILED) {
		int e = errno;
		if (prot == PROT_NONE && (flags & MAP_ANONYMOUS))
			mt_map_reserve(p, len); /* address space, not memory */
		else
			mt_map_add(p, len, !(flags & MAP_ANONYMOUS), 0);
		errno = e;
	} else {
		mt_oom_host_failed("mmap", len);
	}
	mt_self.guard = 0;
	return p;
}

MT_EXPORT void *
mmap(void *a, size_t len, int prot, int flags, int fd, off_t off) {
	if (MT_UNLIKELY(!mt_real.mmap) && !mt_real_resolving)
		mt_real_resolve();
	return mmap_common(mt_real.mmap, a, len, prot, flags, fd, off);
}

MT_EXPORT void *
mmap64(void *a, size_t len, int prot, int flags, int fd, off_t off) {
	if (MT_UNLIKELY(!mt_real.mmap64) && !mt_real_resolving)
		mt_real_resolve();
	return mmap_common(mt_real.mmap64 ? mt_real.mmap64 : mt_real.mmap, a, len, prot,
			   flags, fd, off);
}

MT_EXPORT int
munmap(void *a, size_t len) {
	if (MT_UNLIKELY(!mt_real.munmap) && !mt_real_resolving)
		mt_real_resolve();
	if (!MT_RECORDING()) {
		if (!mt_real.munmap) {
			long r = mt_sys(SYS_munmap, a, len, 0, 0, 0, 0);
			return r < 0 ? (errno = (int)-r, -1) : 0;
		}
		return mt_real.munmap(a, len);
	}
	mt_self.guard = 1;
	int e = errno;
	/* Released before the real call, like free: once the kernel unmaps,
	 * another thread's mmap may be given the same range. */
	mt_map_release(a, len, NULL);
	errno = e;
	int r = mt_real.munmap(a, len);
	mt_self.guard = 0;
	return r;
}

/* A reservation made accessible is charged from then on (to the stack
 * that reserved it), and an anonymous mapping made PROT_NONE is a
 * reservation again: a JIT or a runtime that commits with mprotect. */
MT_EXPORT int
mprotect(void *a, size_t len, int prot) {
	if (MT_UNLIKELY(!mt_real.mprotect) && !mt_real_resolving)
		mt_real_resolve();
	if (!mt_real.mprotect) {
		long r = mt_sys(SYS_mprotect, a, len, prot, 0, 0, 0);
		return r < 0 ? (errno = (int)-r, -1) : 0;
	}
	if (!MT_RECORDING())
		return mt_real.mprotect(a, len, prot);
	mt_self.guard = 1;
	int r = mt_real.mprotect(a, len, prot);
	int e = errno;
	if (r == 0)
		mt_map_protect(a, len, prot != PROT_NONE);
	errno = e;
	mt_self.guard = 0;
	return r;
}

MT_EXPORT void *
mremap(void *old, size_t oldlen, size_t newlen, int flags, ...) {
	void *newaddr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		newaddr = va_arg(ap, void *);
		va_end(ap);
	}
	if (MT_UNLIKELY(!mt_real.mremap) && !mt_real_resolving)
		mt_real_resolve();
	if (!MT_RECORDING())
		return mt_real.mremap(old, oldlen, newlen, flags, newaddr);
	mt_self.guard = 1;
	int e = errno;
	struct mt_map first;
	/* Released before the call (the old range may be reused the moment
	 * it returns); the charge moves with the mapping: the new range goes
	 * to the site that made the old one.  On failure the old range is
	 * tracked again. */
	mt_map_release(old, oldlen, &first);
	errno = e;
	void *p = mt_real.mremap(old, oldlen, newlen, flags, newaddr);
	e = errno;
	if (p != MAP_FAILED)
		mt_map_add(p, newlen, first.kind == MT_MMAP_FILE, first.stack);
	else if (first.start)
		mt_map_add(old, oldlen, first.kind == MT_MMAP_FILE, first.stack);
	errno = e;
	if (p == MAP_FAILED)
		mt_oom_host_failed("mremap", newlen);
	mt_self.guard = 0;
	return p;
}
