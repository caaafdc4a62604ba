/*
 * unwind.c — stack capture for call sites: libunwind's unw_backtrace (fast
 * path with per-thread caches; DWARF, works without frame pointers) or a
 * bounds-checked frame-pointer walk for builds with -fno-omit-frame-pointer.
 * Frames inside the shim are stripped by address range, not by a fixed skip
 * count, so inlining and tail calls cannot shift the first frame.
 */
#include "platform/glue.h"
#include "format.h"
#include "capture/unwind.h"
#include "capture/cfi.h"
#ifdef MT_CFI_CHECK
#include "platform/buf.h"
#endif
#include <link.h>
#include <sys/auxv.h>
#include <string.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

static uintptr_t self_lo, self_hi; /* the shim's executable segment */
static uintptr_t ld_lo, ld_hi;     /* the dynamic loader's */

/* The executable segments of the shim (the one holding self) and of
 * the dynamic loader (the object loaded at ld_base, AT_BASE): one pass
 * over the loaded objects. */
struct texts {
	uintptr_t self, ld_base;
};

static int
find_texts(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	const struct texts *t = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		uintptr_t hi = lo + ph->p_memsz;
		if (t->self >= lo && t->self < hi) {
			self_lo = lo;
			self_hi = hi;
		}
		if (t->ld_base && info->dlpi_addr == t->ld_base && !ld_hi) {
			ld_lo = lo;
			ld_hi = hi;
		}
	}
	return self_hi && (!t->ld_base || ld_hi);
}

void
mt_unwind_init(void *(*sym)(void *, const char *)) {
	/* dl_iterate_phdr takes the loader lock; called from the constructor,
	 * never from a hook. */
	struct texts t = {(uintptr_t)&mt_unwind_init, (uintptr_t)getauxval(AT_BASE)};
	dl_iterate_phdr(find_texts, &t);
	mt_cfi_init(sym);
}

/* libunwind is set up at its first use, not at start: its set-up opens a
 * pipe (two descriptors, kept) and maps its caches, which a program whose
 * stacks the CFI walker follows never needs.  Inside the loader gate. */
static int unw_ready;

static inline void
unw_first_use(void) {
	if (MT_UNLIKELY(!__atomic_load_n(&unw_ready, __ATOMIC_ACQUIRE)) &&
	    !__atomic_exchange_n(&unw_ready, 1, __ATOMIC_ACQ_REL))
		unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

/* How many of the innermost frames are the shim's own. */
static int
self_frames(const uintptr_t *pcs, int n) {
	int skip = 0;
	while (skip < n && pcs[skip] >= self_lo && pcs[skip] < self_hi)
		skip++;
	return skip;
}

/* The calling thread's stack: the readable mapping that holds its stack
 * pointer, found once per thread (and again when the stack pointer is
 * elsewhere: a coroutine, a signal stack) by reading /proc/self/maps with
 * raw syscalls through a fixed buffer.  pthread_getattr_np would tell the
 * same but allocates (the cpuset, and fopen of the maps for the main
 * thread).  Reading inside one readable anonymous mapping cannot fault, so
 * a frame chain through garbage ends at the mapping's top instead of in
 * SIGSEGV (it did: Py_FinalizeEx's frames under PYTHONMALLOC=malloc).
 * Never allocates. */
MT_TLS uintptr_t mt_stk_lo, mt_stk_hi; /* read inline by mt_unwind_recall */
#define stk_lo mt_stk_lo
#define stk_hi mt_stk_hi
static MT_TLS int stk_none; /* sp in no readable mapping: do not look again */
/* Reads of the maps a thread may make: a program switching between many
 * stacks (coroutines on mmap'd stacks) would read them at each switch;
 * past this, a stack pointer outside the last range found goes to
 * libunwind, which needs no bounds.  (The main thread's stack growing
 * below where it was found takes one read each time it does.) */
#define STK_FINDS 256
static MT_TLS unsigned stk_finds;

static uint64_t
hexval(const char **s, const char *end) {
	uint64_t v = 0;
	for (; *s < end; ++*s) {
		char c = **s;
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	return v;
}

/* One line's head "lo-hi rwxp": 1 and the range if it holds sp, readable. */
static int
maps_line(const char *s, const char *end, uintptr_t sp, uintptr_t *lo, uintptr_t *hi) {
	uint64_t a = hexval(&s, end);
	if (s >= end || *s++ != '-')
		return 0;
	uint64_t b = hexval(&s, end);
	if (s + 2 > end || *s++ != ' ' || *s != 'r')
		return 0;
	if (sp < a || sp >= b)
		return 0;
	*lo = (uintptr_t)a;
	*hi = (uintptr_t)b;
	return 1;
}

static int
find_stack(uintptr_t sp) {
	/* what it kept was under the old top; a thread's first find makes
	 * the walker's tables, which mt_unwind_recall reads untested inside
	 * the mapping found (cfi.h): none, and the stack stays unknown */
	if (!mt_cfi_recall_clear())
		return 0;
	long fd = mt_sys(SYS_openat, -100 /* AT_FDCWD */, "/proc/self/maps",
			 02000000 /* O_RDONLY | O_CLOEXEC */, 0, 0, 0);
	if (fd < 0)
		return 0;
	char buf[4096], head[64];
	size_t hn = 0;   /* bytes of the current line's head kept */
	int skipping = 0; /* past the head: skip to the newline */
	int found = 0;
	long r;
	while (!found && (r = mt_sys(SYS_read, fd, buf, sizeof buf, 0, 0, 0)) > 0) {
		for (long i = 0; i < r && !found; i++) {
			char c = buf[i];
			if (c == '\n') {
				if (!skipping)
					found = maps_line(head, head + hn, sp, &stk_lo, &stk_hi);
				hn = 0;
				skipping = 0;
			} else if (!skipping) {
				head[hn++] = c;
				if (hn == sizeof head) {
					found = maps_line(head, head + hn, sp, &stk_lo, &stk_hi);
					skipping = 1;
				}
			}
		}
	}
	mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
	return found;
}

/* 1 when sp lies in the stack mapping last found (stk_lo, stk_hi), found
 * again if not (STK_FINDS times a thread at most); 0: the stack is not
 * known, and the caller falls back to libunwind. */
static inline int
stack_known(uintptr_t sp) {
	if (MT_UNLIKELY(sp < stk_lo || sp >= stk_hi)) {
		if (stk_none || stk_finds >= STK_FINDS)
			return 0;
		stk_finds++;
		if (!find_stack(sp)) {
			stk_none = 1;
			return 0;
		}
	}
	return 1;
}

/* Frame-pointer walk inside the thread's stack: each frame must lie above
 * the previous one, 16 bytes below the stack's top at most, and be 16-byte
 * aligned as the x86-64 ABI requires.  Returns -1 when the stack is not
 * known (the caller falls back to libunwind). */
static int
fp_walk(uintptr_t *pcs, int max) {
	uintptr_t *fp = __builtin_frame_address(0);
	uintptr_t sp = (uintptr_t)fp;
	if (!stack_known(sp))
		return -1;
	uintptr_t lo = sp, hi = stk_hi;
	int n = 0;
	while (n < max) {
		uintptr_t f = (uintptr_t)fp;
		if (f < lo || f > hi - 16 || (f & 15))
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

#define GATE_SLOTS 64
/* threads inside, per slot: a thread's own line, shared past 64 threads */
static struct {
	uint32_t n;
	char pad[60];
} inside[GATE_SLOTS] __attribute__((aligned(64)));
static uint32_t forking, next_slot;
static MT_TLS int gate_slot = -1;

void
mt_loader_enter(void) {
	if (MT_UNLIKELY(gate_slot < 0))
		gate_slot = (int)(__atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED) % GATE_SLOTS);
	uint32_t *n = &inside[gate_slot].n;
	for (;;) {
		/* Dekker with mt_loader_prefork: either we see forking, or it
		 * sees us inside and waits */
		__atomic_add_fetch(n, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&forking, __ATOMIC_SEQ_CST))
			return;
		__atomic_sub_fetch(n, 1, __ATOMIC_SEQ_CST);
		while (__atomic_load_n(&forking, __ATOMIC_ACQUIRE))
			mt_sys(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
	}
}

void
mt_loader_leave(void) {
	__atomic_sub_fetch(&inside[gate_slot].n, 1, __ATOMIC_RELEASE);
}

void
mt_loader_prefork(void) {
	__atomic_store_n(&forking, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < GATE_SLOTS; i++)
		while (__atomic_load_n(&inside[i].n, __ATOMIC_SEQ_CST))
			mt_sys(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
}

void
mt_loader_postfork(int child) {
	/* the child: a thread that was between its add and its sub at the
	 * fork is not there to take its count back */
	if (child)
		for (int i = 0; i < GATE_SLOTS; i++)
			inside[i].n = 0;
	__atomic_store_n(&forking, 0, __ATOMIC_RELEASE);
}

#ifdef MT_CFI_CHECK
/* The checking build (make's $(B)/cfi-check/libmemtally.so, for
 * test_cfi_programs): each stack the CFI walker gives is walked again by
 * libunwind and the two compared past the shim's own frames, cut where the
 * capture cuts (max frames, the stop range).  A difference is written to
 * stderr with both stacks; the destructor writes the counts.  The shim's
 * own formatter and write(2): this runs inside malloc too. */
static uint64_t chk_walks, chk_differ, chk_recalls;

/* frames past the shim's, cut after the first in the stop range and at max */
static int
chk_cut(const uintptr_t *pcs, int n, int max, uintptr_t stop_lo, uintptr_t stop_hi, int *skip) {
	*skip = self_frames(pcs, n);
	int m = n - *skip < max ? n - *skip : max;
	int k = mt_pcs_find(pcs + *skip, m, stop_lo, stop_hi);
	return k < m ? k + 1 : m;
}

static void
chk_walk(const uintptr_t *got, int n, int max, uintptr_t stop_lo, uintptr_t stop_hi) {
	uintptr_t ref[MT_MAX_DEPTH + 24];
	mt_loader_enter();
	unw_first_use();
	int nr = unw_backtrace((void **)ref, max + 24);
	mt_loader_leave();
	int sa, sb, a = chk_cut(got, n, max, stop_lo, stop_hi, &sa);
	int b = chk_cut(ref, nr, max, stop_lo, stop_hi, &sb);
	__atomic_add_fetch(&chk_walks, 1, __ATOMIC_RELAXED);
	if (a == b && !memcmp(got + sa, ref + sb, (size_t)a * sizeof *got))
		return;
	if (__atomic_add_fetch(&chk_differ, 1, __ATOMIC_RELAXED) > 20)
		return;
	char mem[4096];
	struct mt_buf buf;
	mt_buf_fixed(&buf, mem, sizeof mem);
	mt_buf_puts(&buf, "memtally-cfi-check: differs: cfi");
	for (int i = sa; i < sa + a; i++)
		mt_buf_printf(&buf, " %lx", (unsigned long)got[i]);
	mt_buf_puts(&buf, " libunwind");
	for (int i = sb; i < sb + b; i++)
		mt_buf_printf(&buf, " %lx", (unsigned long)ref[i]);
	mt_buf_putc(&buf, '\n');
	mt_write_all(2, buf.p, buf.len);
}

__attribute__((destructor)) static void
chk_report(void) {
	char mem[128];
	struct mt_buf buf;
	mt_buf_fixed(&buf, mem, sizeof mem);
	mt_buf_printf(&buf, "memtally-cfi-check: walks %lu differ %lu handed %lu recalls %lu\n",
		      (unsigned long)chk_walks, (unsigned long)chk_differ,
		      (unsigned long)mt_cfi_handed(), (unsigned long)chk_recalls);
	mt_write_all(2, buf.p, buf.len);
}
#endif

/* The capture in progress walked with the CFI walker from a hook, whole:
 * mt_unwind_keep may keep its id (then clears it). */
static MT_TLS int walked;
#ifdef MT_CFI_CHECK
/* the checking build: a recall's id, checked against the walk's */
static MT_TLS uint32_t chk_recalled;
#endif

#ifdef MT_CFI_CHECK
int
mt_unwind_recall(uintptr_t hook, int how, uint64_t tag, uint32_t *id) {
	uintptr_t sp = hook + 16;
	if (how != MT_UNWIND_CFI || !hook || sp < stk_lo || sp >= stk_hi)
		return 0;
	/* every capture walks (and is checked against libunwind); a recall's
	 * id is checked against the walk's in mt_unwind_keep */
	chk_recalled = 0;
	uint32_t got;
	if (mt_cfi_recall(hook, tag, &got))
		chk_recalled = got;
	(void)id;
	return 0;
}
#endif

void
mt_unwind_keep(uint64_t tag, uint32_t id) {
#ifdef MT_CFI_CHECK
	if (chk_recalled) {
		__atomic_add_fetch(&chk_recalls, 1, __ATOMIC_RELAXED);
		if (chk_recalled != id && __atomic_add_fetch(&chk_differ, 1, __ATOMIC_RELAXED) <= 20) {
			char mem[128];
			struct mt_buf buf;
			mt_buf_fixed(&buf, mem, sizeof mem);
			mt_buf_printf(&buf, "memtally-cfi-check: differs: recall %u walk %u\n",
				      (unsigned)chk_recalled, (unsigned)id);
			mt_write_all(2, buf.p, buf.len);
		}
		chk_recalled = 0;
	}
#endif
	if (walked && id)
		mt_cfi_keep(tag, id);
	walked = 0;
}

int
mt_unwind(uintptr_t *pcs, int max, int how, uintptr_t stop_lo, uintptr_t stop_hi,
	  uintptr_t hook) {
	/* Capture a few extra to make room for the shim's own frames. */
	enum { EXTRA = 8 };
	uintptr_t tmp[MT_MAX_DEPTH + EXTRA];
	int want = max + EXTRA, n = -1, stopped = 0;
	walked = 0;
	if (how == MT_UNWIND_FP)
		n = fp_walk(tmp, want);
	else if (how == MT_UNWIND_CFI && stack_known((uintptr_t)__builtin_frame_address(0))) {
		/* from the hook's caller: no frame of the shim's to skip */
		n = mt_cfi_walk(tmp, hook ? max : want, stk_hi, stop_lo, stop_hi, hook);
		stopped = n >= 0; /* at the first frame in the stop range */
		walked = stopped && hook;
#ifdef MT_CFI_CHECK
		if (n >= 0)
			chk_walk(tmp, n, max, stop_lo, stop_hi);
#endif
	}
	if (n < 0) {
		int saved_errno = errno; /* libunwind may set it; the hook's
					  * caller sees its own */
		mt_loader_enter();
		unw_first_use();
		n = unw_backtrace((void **)tmp, want);
		mt_loader_leave();
		errno = saved_errno;
	}
	if (n <= 0)
		return 0;
	int skip = self_frames(tmp, n); /* one copy, past them */
	n -= skip;
	if (n > max)
		n = max;
	if (!stopped && stop_hi) { /* the other walkers walk on: cut there */
		int k = mt_pcs_find(tmp + skip, n, stop_lo, stop_hi);
		if (k < n)
			n = k + 1;
	}
	memcpy(pcs, tmp + skip, (size_t)n * sizeof *pcs);
	return n;
}

uint64_t
mt_unwind_fallbacks(void) {
	return mt_cfi_handed();
}

void
mt_unwind_unloaded(void) {
	mt_cfi_forget();
}

uint64_t
mt_unwind_memory(void) {
	return mt_cfi_memory();
}

int
mt_unwind_deep_cut(uintptr_t *pcs, int n, int depth, int whole) {
	int tail = depth / 4, head = depth - 1 - tail;
	if (n <= depth)
		return n;
	if (!whole || tail < 1 || head < 1)
		return depth; /* the innermost, as far as the depth goes */
	pcs[head] = MT_PC_DEEP + (uintptr_t)(n - head - tail);
	memmove(pcs + head + 1, pcs + n - tail, (size_t)tail * sizeof *pcs);
	return depth;
}

/* k: the innermost frame in the loader; pcs[k - 1] is the initializer's
 * call, pcs[keep .. k - 2] go. */
int
mt_unwind_loader_cut(uintptr_t *pcs, int n, int keep) {
	if (!keep || !ld_hi || n <= keep + 1)
		return n;
	int k = mt_pcs_find(pcs, n, ld_lo, ld_hi);
	if (k == n || k - 1 <= keep)
		return n;
	pcs[keep] = MT_PC_ELIDED;
	memmove(pcs + keep + 1, pcs + k - 1, (size_t)(n - k + 1) * sizeof *pcs);
	return keep + 1 + n - k + 1;
}
