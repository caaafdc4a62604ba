/*
 * unwind.c — stack capture for call sites: libunwind's unw_backtrace (fast
 * path with per-thread caches; DWARF, works without frame pointers) or a
 * bounds-checked frame-pointer walk for builds with -fno-omit-frame-pointer.
 * Frames inside the shim are stripped by address range, not by a fixed skip
 * count, so inlining and tail calls cannot shift the first frame.
 */
#include "glue.h"
#include "unwind.h"
#include <link.h>
#include <string.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

static uintptr_t self_lo, self_hi; /* the shim's executable segment */

static int
find_self(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	uintptr_t want = (uintptr_t)arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		uintptr_t hi = lo + ph->p_memsz;
		if (want >= lo && want < hi) {
			self_lo = lo;
			self_hi = hi;
			return 1;
		}
	}
	return 0;
}

void
mt_unwind_init(void) {
	/* dl_iterate_phdr takes the loader lock; called from the constructor,
	 * never from a hook. */
	dl_iterate_phdr(find_self, (void *)(uintptr_t)&mt_unwind_init);
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

static int
strip_self(uintptr_t *pcs, int n) {
	int skip = 0;
	while (skip < n && pcs[skip] >= self_lo && pcs[skip] < self_hi)
		skip++;
	if (skip)
		memmove(pcs, pcs + skip, (size_t)(n - skip) * sizeof *pcs);
	return n - skip;
}

/* Frame-pointer walk.  Each frame must lie above the previous one, within
 * 16 MiB of the start (no stack is larger without a guard we would hit
 * first), and be 16-byte aligned as the x86-64 ABI requires. */
static int
fp_walk(uintptr_t *pcs, int max) {
	uintptr_t *fp = __builtin_frame_address(0);
	uintptr_t lo = (uintptr_t)fp, hi = lo + (16u << 20);
	int n = 0;
	while (n < max) {
		uintptr_t f = (uintptr_t)fp;
		if (f < lo || f + 16 > hi || (f & 15))
			break;
		uintptr_t ret = fp[1];
		if (ret < 4096)
			break;
		pcs[n++] = ret;
		uintptr_t *next = (uintptr_t *)fp[0];
		if ((uintptr_t)next <= f)
			break;
		fp = next;
	}
	return n;
}

int
mt_unwind(uintptr_t *pcs, int max, int fp) {
	/* Capture a few extra to make room for the shim's own frames. */
	enum { EXTRA = 8 };
	uintptr_t tmp[128 + EXTRA];
	int want = max + EXTRA;
	int n = fp ? fp_walk(tmp, want) : unw_backtrace((void **)tmp, want);
	if (n <= 0)
		return 0;
	n = strip_self(tmp, n);
	if (n > max)
		n = max;
	memcpy(pcs, tmp, (size_t)n * sizeof *pcs);
	return n;
}
