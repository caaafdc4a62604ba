/*
 * interpose.c — the exported allocation entry points: the malloc family
 * (mappings.c has mmap and its kin).  Each hook forwards to the real
 * function (platform/real.h, which finds them and keeps dlsym's bootstrap
 * pool) and makes one core call (charge.h).
 *
 * Safe from the first instruction: a hook can run before our constructor
 * (another library's constructor), while dlsym is finding the real
 * functions (dlsym itself may calloc: those calls are served from a static
 * pool and never freed), inside the shim (the TLS guard forwards straight
 * through), and after the exit snapshot.  errno is what the real function
 * left: the core saves and restores it around recording.
 */
#include "platform/glue.h"
#include "platform/dl.h"
#include "platform/real.h"
#include "platform/config.h"
#include "capture/charge.h"
#include "state/ptrtab.h"
#include "platform/buf.h"
#include "state/sites.h"
#include "output/oom.h"
#include "entry/interpose.h"
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

void
mt_hooks_resolve(void) {
	if (!mt_real.malloc)
		mt_real_resolve();
	/* the pool is handed out only while dlsym runs, so it is whole now:
	 * its blocks (and NULL) pass the free fast path's filter to the
	 * full path, which knows them */
	mt_ptrtab_filter_hold((uintptr_t)mt_real_pool, mt_real_pool_end());
}

#define ENSURE(name)                                                           \
	do {                                                                   \
		if (MT_UNLIKELY(!mt_real.name))                                   \
			mt_real_resolve();                                             \
	} while (0)

/* A failed allocation: the dump is written before the error returns
 * (output/oom.h, out of line). */
#define OOM(api, size) mt_oom_host_failed(api, size)

/* The hook's own frame (its frame pointer: the shim keeps them), from
 * which a capture starts at the hook's caller: its return address is the
 * stack's first frame (all of it at MEMTALLY_DEPTH=1), and the CFI walker
 * starts there instead of stepping through the shim's own frames.  Only
 * in the exported hooks themselves, while their frame is live. */
#define CALLER() ((uintptr_t)__builtin_frame_address(0))


/* The mt_real.* calls below are the allocator the program would have called
 * without us: forwarding is what a hook is for.
 *  - not recording (before the constructor, inside the shim, host
 *    tracking off): the call is forwarded as it came, and nothing of the
 *    shim's is touched or held;
 *  - recursion: the guard set around the recording calls (mt_self.guard)
 *    sends any allocation they make, or a signal handler's, straight
 *    through the !MT_RECORDING() path; the sampling fast path's malloc sets
 *    it around its real call too, and its free, like the !MT_RECORDING()
 *    path, forwards after its count with nothing of the shim's left to
 *    touch;
 *  - deadlock: no shim lock is held across a mt_real.* call (the pointer
 *    table's shard locks are taken and released inside mt_heap_* before
 *    or after it), so glibc's own arena locks never nest inside ours.
 *    The one thing held across one is solo mode's busy flag around the
 *    solo thread's real free (mt_heap_free, which makes that call): a
 *    thread waiting on it in mt_solo_end holds no allocator lock;
 *  - OOM dumps: a dump is written only after the real call has returned
 *    NULL (OOM() below, in every path, the sampling one included), never
 *    from inside it, and it allocates nothing itself; an allocation by
 *    anything it calls arrives with the guard set and goes straight to
 *    mt_real.*.
 *
 * The sampling fast path (malloc and free): while sampling, most calls
 * record nothing but their counts.  One load (mt_fast_below, which holds
 * mt_active, host tracking, sampling, the pointer table's filter and
 * MEMTALLY_EXACT_ABOVE) and this thread's own state decide it, and such a
 * call does no more than that; the registers, the other tests and the
 * frame a capture starts from are for the calls that record.
 *
 * malloc is a two-instruction dispatch (x86-64, as dlsym's trampoline in
 * dl.c): below mt_fast_below to mt_malloc_sampled, else to mt_malloc_full.
 * Both are reached by a jump, never a call, so each one's frame is the
 * hook's frame: its return address is the program's call site, which is
 * where a capture starts (CALLER()).  Exact mode pays the compare. */
__asm__(".text\n"
	".globl malloc\n"
	".type malloc, @function\n"
	".p2align 4\n"
	"malloc:\n"
	"	.cfi_startproc\n"
	"	cmpq mt_fast_below(%rip), %rdi\n"
	"	jb mt_malloc_sampled\n"
	"	jmp mt_malloc_full\n"
	"	.cfi_endproc\n"
	".size malloc, .-malloc\n");
void *mt_malloc_full(size_t n);
void *mt_malloc_sampled(size_t n);

/* The recording path of malloc, in a function malloc jumped to. */
static inline __attribute__((always_inline)) void *
malloc_body(size_t n, uintptr_t hook) {
	if (MT_UNLIKELY(!mt_real.malloc)) {
		if (mt_real_resolving)
			return mt_real_pool_alloc(n, 16);
		mt_real_resolve();
	}
	if (!MT_RECORDING())
		return mt_real.malloc(n);
	mt_self.guard = 1;
	void *p = mt_real.malloc(n);
	if (p) {
		mt_heap_alloc(p, n, hook); /* keeps errno */
	} else {
		OOM("malloc", n);
	}
	mt_self.guard = 0;
	return p;
}

__attribute__((used)) MT_NOINLINE void *
mt_malloc_full(size_t n) {
	return malloc_body(n, CALLER());
}

/* n < mt_fast_below: sampling, and n below MEMTALLY_EXACT_ABOVE.  Counts
 * the call and takes n off the countdown unless the countdown runs out
 * (then the full path draws and records).  In assembly: it is the whole
 * of a sampled malloc's cost, and as C its registers (saved and restored
 * around the real call) and its frame were half of it.  It needs nothing
 * kept across the real call but n (for a failure), so one push keeps it
 * and aligns the stack; the thread's state is found again after the call.
 *   - this thread without its own count slot (tc NULL: its first call,
 *     or threads sharing the last slot), inside the shim (guard), or the
 *     countdown run out (taken back first: the full path takes it
 *     again): a jump to mt_malloc_full, whose frame is then
 *     the hook's (CALLER() its caller's), as from malloc;
 *   - the counts: plain adds to the slot this thread owns (one writer,
 *     as mt_tc_own_add);
 *   - the guard is set around the real call: what it calls (mmap) is the
 *     allocator's;
 *   - NULL: a jump to mt_malloc_sampled_failed (C), with n. */
#define MT_SELF_GUARD 0
#define MT_SELF_COUNTDOWN 8
#define MT_SELF_TC 32
#define MT_TC_ALLOCS 0
#define MT_TC_ALLOC_BYTES 8
_Static_assert(offsetof(struct mt_thread, guard) == MT_SELF_GUARD, "asm offsets");
_Static_assert(offsetof(struct mt_thread, countdown) == MT_SELF_COUNTDOWN, "asm offsets");
_Static_assert(offsetof(struct mt_thread, tc) == MT_SELF_TC, "asm offsets");
_Static_assert(offsetof(struct mt_tcount, allocs) == MT_TC_ALLOCS, "asm offsets");
_Static_assert(offsetof(struct mt_tcount, alloc_bytes) == MT_TC_ALLOC_BYTES, "asm offsets");
_Static_assert(offsetof(struct mt_real, malloc) == 0, "asm offsets");
#define MT_S_(x) #x
#define MT_S(x) MT_S_(x)
__attribute__((used)) MT_NOINLINE void *mt_malloc_sampled_failed(size_t n);
__asm__(".text\n"
	".globl mt_malloc_sampled\n"
	".hidden mt_malloc_sampled\n"
	".type mt_malloc_sampled, @function\n"
	".p2align 4\n"
	"mt_malloc_sampled:\n"
	"	.cfi_startproc\n"
	"	movq mt_self@gottpoff(%rip), %rax\n"
	"	movq %fs:" MT_S(MT_SELF_TC) "(%rax), %rcx\n"
	"	testq %rcx, %rcx\n"
	"	jz mt_malloc_full\n"
	"	cmpl $0, %fs:" MT_S(MT_SELF_GUARD) "(%rax)\n"
	"	jne mt_malloc_full\n"
	"	subq %rdi, %fs:" MT_S(MT_SELF_COUNTDOWN) "(%rax)\n"
	"	jle 1f\n"
	"	addq $1, " MT_S(MT_TC_ALLOCS) "(%rcx)\n"
	"	addq %rdi, " MT_S(MT_TC_ALLOC_BYTES) "(%rcx)\n"
	"	movl $1, %fs:" MT_S(MT_SELF_GUARD) "(%rax)\n"
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call *mt_real(%rip)\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	movq mt_self@gottpoff(%rip), %rcx\n"
	"	movl $0, %fs:" MT_S(MT_SELF_GUARD) "(%rcx)\n"
	"	testq %rax, %rax\n"
	"	jz mt_malloc_sampled_failed\n"
	"	ret\n"
	"1:\n" /* the countdown reached: back as it was, for the full path */
	"	addq %rdi, %fs:" MT_S(MT_SELF_COUNTDOWN) "(%rax)\n"
	"	jmp mt_malloc_full\n"
	"	.cfi_endproc\n"
	".size mt_malloc_sampled, .-mt_malloc_sampled\n");

/* The real malloc failed in mt_malloc_sampled: the counts go back, and
 * the failure is an OOM like any other (dumped before it returns).
 * Reached by a jump: its frame is the hook's. */
__attribute__((used)) MT_NOINLINE void *
mt_malloc_sampled_failed(size_t n) {
	struct mt_tcount *tc = mt_self.tc;
	mt_tc_own_add2(&tc->allocs, (uint64_t)-1, &tc->alloc_bytes, (uint64_t)-n);
	mt_self.countdown += (int64_t)n;
	mt_self.guard = 1;
	OOM("malloc", n);
	mt_self.guard = 0;
	return NULL;
}

/* calloc is malloc's dispatch on n * size: an overflow, or a total of
 * mt_fast_below or more, to mt_calloc_full (C, below); else
 * mt_calloc_sampled's part, mt_malloc_sampled's with calloc's call (the
 * counts, the countdown, the guard around the real call; its failure to
 * mt_calloc_sampled_failed with the total).  Every way out is a jump or
 * the real call's return: the frame a capture starts from is the hook's. */
#define MT_REAL_CALLOC 8
_Static_assert(offsetof(struct mt_real, calloc) == MT_REAL_CALLOC, "asm offsets");
void *mt_calloc_full(size_t n, size_t size);
__attribute__((used)) MT_NOINLINE void *mt_calloc_sampled_failed(size_t total);
__asm__(".text\n"
	".globl calloc\n"
	".type calloc, @function\n"
	".p2align 4\n"
	"calloc:\n"
	"	.cfi_startproc\n"
	"	movq %rdi, %rax\n"
	"	mulq %rsi\n"
	"	jc mt_calloc_full\n"
	"	cmpq mt_fast_below(%rip), %rax\n"
	"	jae mt_calloc_full\n"
	"	movq mt_self@gottpoff(%rip), %rdx\n"
	"	movq %fs:" MT_S(MT_SELF_TC) "(%rdx), %rcx\n"
	"	testq %rcx, %rcx\n"
	"	jz mt_calloc_full\n"
	"	cmpl $0, %fs:" MT_S(MT_SELF_GUARD) "(%rdx)\n"
	"	jne mt_calloc_full\n"
	"	subq %rax, %fs:" MT_S(MT_SELF_COUNTDOWN) "(%rdx)\n"
	"	jle 1f\n"
	"	addq $1, " MT_S(MT_TC_ALLOCS) "(%rcx)\n"
	"	addq %rax, " MT_S(MT_TC_ALLOC_BYTES) "(%rcx)\n"
	"	movl $1, %fs:" MT_S(MT_SELF_GUARD) "(%rdx)\n"
	"	pushq %rax\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call *mt_real+" MT_S(MT_REAL_CALLOC) "(%rip)\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	movq mt_self@gottpoff(%rip), %rcx\n"
	"	movl $0, %fs:" MT_S(MT_SELF_GUARD) "(%rcx)\n"
	"	testq %rax, %rax\n"
	"	jz mt_calloc_sampled_failed\n"
	"	ret\n"
	"1:\n" /* the countdown reached: back as it was, for the full path */
	"	addq %rax, %fs:" MT_S(MT_SELF_COUNTDOWN) "(%rdx)\n"
	"	jmp mt_calloc_full\n"
	"	.cfi_endproc\n"
	".size calloc, .-calloc\n");

/* The real calloc failed on calloc's sampling path: the counts go back,
 * and the failure is an OOM (mt_malloc_sampled_failed's).  Reached by a
 * jump: its frame is the hook's. */
__attribute__((used)) MT_NOINLINE void *
mt_calloc_sampled_failed(size_t total) {
	struct mt_tcount *tc = mt_self.tc;
	mt_tc_own_add2(&tc->allocs, (uint64_t)-1, &tc->alloc_bytes, (uint64_t)-total);
	mt_self.countdown += (int64_t)total;
	mt_self.guard = 1;
	OOM("calloc", total);
	mt_self.guard = 0;
	return NULL;
}

__attribute__((used)) MT_NOINLINE void *
mt_calloc_full(size_t n, size_t size) {
	if (MT_UNLIKELY(!mt_real.calloc)) {
		if (mt_real_resolving) {
			size_t t;
			if (__builtin_mul_overflow(n, size, &t))
				return NULL;
			return mt_real_pool_alloc(t, 16);
		}
		mt_real_resolve();
	}
	if (!MT_RECORDING()) /* the real allocator, as for malloc above */
		return mt_real.calloc(n, size);
	mt_self.guard = 1;
	void *p = mt_real.calloc(n, size);
	if (p) {
		mt_heap_alloc(p, n * size, CALLER());
	} else {
		size_t t;
		OOM("calloc", __builtin_mul_overflow(n, size, &t) ? SIZE_MAX : t);
	}
	mt_self.guard = 0;
	return p;
}

MT_EXPORT void
free(void *p) {
	/* the sampling fast path (above malloc): a block the pointer table
	 * certainly does not hold (its filter) is counted and forwarded,
	 * without the guard (no shim state is touched after the count).
	 * NULL and the pool's blocks are held in the filter
	 * (mt_hooks_resolve), so they take the full path below */
	struct mt_tcount *tc;
	if (MT_LIKELY(__atomic_load_n(&mt_fast_below, __ATOMIC_RELAXED)) && !mt_self.guard &&
	    (tc = mt_self.tc) && !mt_ptrtab_maybe_filtered((uintptr_t)p)) {
		mt_tc_own_add(&tc->frees, 1);
		mt_real.free(p);
		return;
	}
	if (MT_UNLIKELY(!p || mt_real_in_pool(p)))
		return;
	ENSURE(free);
	if (MT_UNLIKELY(!mt_real.free))
		return; /* only while dlsym runs: leak rather than crash */
	if (!MT_RECORDING()) {
		mt_real.free(p);
		return;
	}
	/* The same filter for the frees the fast path above does not take
	 * (a thread's first call, threads sharing the last count slot):
	 * count the free and forward it without the guard, as the
	 * !MT_RECORDING() path does (mt_heap_freed touches only this thread's
	 * counters; the real free holds none of our locks) */
	if (!mt_ptrtab_maybe((uintptr_t)p)) {
		mt_heap_freed();
		mt_real.free(p);
		return;
	}
	mt_self.guard = 1;
	mt_heap_free(p, mt_real.free); /* the entry out before the real free
				     * (charge.h); keeps errno */
	mt_self.guard = 0;
}

/* realloc and reallocarray: the old entry is taken before the real call
 * (another thread may be handed the old address the moment it returns);
 * a failed call keeps the old block, so the entry goes back. */
static void *
realloc_common(void *p, size_t n, size_t size, int array, uintptr_t ret) {
	size_t total;
	if (array && __builtin_mul_overflow(n, size, &total))
		total = SIZE_MAX; /* the real call fails with ENOMEM */
	else
		total = array ? n * size : n;
	if (!MT_RECORDING()) /* the real allocator, as for malloc above */
		return array ? mt_real.reallocarray(p, n, size) : mt_real.realloc(p, n);
	mt_self.guard = 1;
	struct mt_ptr old;
	int had = 0;
	if (p)
		mt_heap_take(p, &old, &had); /* keeps errno */
	/* the guard is set: what the real call allocates passes straight
	 * through, and an OOM dump is written only after it returns */
	void *q = array ? mt_real.reallocarray(p, n, size) : mt_real.realloc(p, n);
	if (MT_LIKELY(q)) {
		if (p)
			mt_heap_freed(); /* the old block is gone */
		mt_heap_alloc(q, total, ret); /* keeps errno */
		mt_self.guard = 0;
		return q;
	}
	int e = errno;
	if (p && !total)
		mt_heap_freed(); /* realloc(p, 0) freed it (a count: no allocation, no lock) */
	else if (had && total) /* failed: the old block is still live */
		mt_heap_restore(&old);
	errno = e;
	if (total)
		OOM(array ? "reallocarray" : "realloc", total);
	mt_self.guard = 0;
	return q;
}

/* The sampling fast path's failure (mt_realloc_sampled): counted
 * nothing, the old block (not tracked) is still the program's.  Reached
 * by a jump: its frame is the hook's. */
__attribute__((used)) MT_NOINLINE void *mt_realloc_sampled_failed(size_t n);
__attribute__((used)) MT_NOINLINE void *
mt_realloc_sampled_failed(size_t n) {
	mt_self.guard = 1;
	OOM("realloc", n);
	mt_self.guard = 0;
	return NULL;
}

/* realloc is malloc's two-instruction dispatch on the new size: below
 * mt_fast_below to mt_realloc_sampled, else to mt_realloc_full; each
 * reached by a jump, so its frame is the hook's (CALLER()), and exact
 * mode's path saves no register for the sampling one. */
__asm__(".text\n"
	".globl realloc\n"
	".type realloc, @function\n"
	".p2align 4\n"
	"realloc:\n"
	"	.cfi_startproc\n"
	"	cmpq mt_fast_below(%rip), %rsi\n"
	"	jb mt_realloc_sampled\n"
	"	jmp mt_realloc_full\n"
	"	.cfi_endproc\n"
	".size realloc, .-realloc\n");
void *mt_realloc_full(void *p, size_t n);
void *mt_realloc_sampled(void *p, size_t n);

static inline __attribute__((always_inline)) void *
realloc_body(void *p, size_t n, uintptr_t hook) {
	if (MT_UNLIKELY(!mt_real.realloc || mt_real_in_pool(p))) {
		if (mt_real_in_pool(p)) { /* a bootstrap block grows into a real one */
			/* our own hook (not libc's): it cannot recurse into
			 * this branch (the new block is not in the pool), no
			 * lock is held here, and the pool serves only the
			 * loader's own calls before the real allocator is
			 * found, never an OOM dump */
			void *q = malloc(n);
			if (q)
				memcpy(q, p, (size_t)(mt_real_pool + MT_REAL_POOL - (char *)p) < n
						     ? (size_t)(mt_real_pool + MT_REAL_POOL - (char *)p)
						     : n);
			return q;
		}
		if (mt_real_resolving)
			return mt_real_pool_alloc(n, 16);
		mt_real_resolve();
	}
	return realloc_common(p, n, 0, 0, hook);
}

__attribute__((used)) MT_NOINLINE void *
mt_realloc_full(void *p, size_t n) {
	return realloc_body(p, n, CALLER());
}

/* n < mt_fast_below: sampling.  A new size the countdown does not reach
 * and an old block (if any) the pointer table certainly does not hold
 * (NULL is a malloc here; the pool's blocks are held in the filter):
 * the counts realloc_common's would be, and nothing else; else a jump
 * to mt_realloc_full (its frame then the hook's).  In assembly, as
 * mt_malloc_sampled (C's frame and saved registers were half of its
 * cost):
 *   - no count slot of its own, inside the shim (guard), the countdown
 *     reached, or p maybe held (mt_ptrtab_maybe_filtered): the full path;
 *   - the guard set around the real call; p and n kept across it (two
 *     pushes and 8 bytes: the stack aligned for the call);
 *   - the old block gone (p, and a new one or n 0): a free counted; a
 *     new block: the countdown takes n, allocs and alloc_bytes count it;
 *     NULL with n > 0: mt_realloc_sampled_failed (the OOM's dump). */
#define MT_TC_FREES 16
_Static_assert(offsetof(struct mt_tcount, frees) == MT_TC_FREES, "asm offsets");
#define MT_REAL_REALLOC 16
_Static_assert(offsetof(struct mt_real, realloc) == MT_REAL_REALLOC, "asm offsets");
_Static_assert(MT_FILTER_BITS == 16, "asm: the filter slot's mask");
__attribute__((used)) MT_NOINLINE void *mt_realloc_sampled_failed(size_t n);
__asm__(".text\n"
	".globl mt_realloc_sampled\n"
	".hidden mt_realloc_sampled\n"
	".type mt_realloc_sampled, @function\n"
	".p2align 4\n"
	"mt_realloc_sampled:\n"
	"	.cfi_startproc\n"
	"	movq mt_self@gottpoff(%rip), %rax\n"
	"	movq %fs:" MT_S(MT_SELF_TC) "(%rax), %rcx\n"
	"	testq %rcx, %rcx\n"
	"	jz mt_realloc_full\n"
	"	cmpl $0, %fs:" MT_S(MT_SELF_GUARD) "(%rax)\n"
	"	jne mt_realloc_full\n"
	"	cmpq %rsi, %fs:" MT_S(MT_SELF_COUNTDOWN) "(%rax)\n"
	"	jle mt_realloc_full\n"
	"	testq %rdi, %rdi\n"
	"	jz 1f\n"
	/* mt_ptrtab_maybe_filtered(p): ((p >> 4) ^ (p >> 20)) & 0xffff */
	"	movq %rdi, %rdx\n"
	"	movq %rdi, %r8\n"
	"	shrq $4, %rdx\n"
	"	shrq $20, %r8\n"
	"	xorq %r8, %rdx\n"
	"	movzwl %dx, %edx\n"
	"	movq %rdx, %r8\n"
	"	shrq $6, %r8\n"
	"	movq mt_ptr_filter(%rip), %r9\n"
	"	movq (%r9,%r8,8), %r9\n"
	"	btq %rdx, %r9\n"
	"	jc mt_realloc_full\n"
	"1:\n"
	"	movl $1, %fs:" MT_S(MT_SELF_GUARD) "(%rax)\n"
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call *mt_real+" MT_S(MT_REAL_REALLOC) "(%rip)\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	movq mt_self@gottpoff(%rip), %rcx\n"
	"	movl $0, %fs:" MT_S(MT_SELF_GUARD) "(%rcx)\n"
	"	movq %fs:" MT_S(MT_SELF_TC) "(%rcx), %rdx\n"
	"	testq %rdi, %rdi\n"
	"	jz 2f\n"
	"	testq %rax, %rax\n"
	"	jnz 3f\n"
	"	testq %rsi, %rsi\n"
	"	jnz 2f\n"
	"3:\n"
	"	addq $1, " MT_S(MT_TC_FREES) "(%rdx)\n"
	"2:\n"
	"	testq %rax, %rax\n"
	"	jz 4f\n"
	"	subq %rsi, %fs:" MT_S(MT_SELF_COUNTDOWN) "(%rcx)\n"
	"	addq $1, " MT_S(MT_TC_ALLOCS) "(%rdx)\n"
	"	addq %rsi, " MT_S(MT_TC_ALLOC_BYTES) "(%rdx)\n"
	"	ret\n"
	"4:\n"
	"	testq %rsi, %rsi\n"
	"	jz 5f\n"
	"	movq %rsi, %rdi\n"
	"	jmp mt_realloc_sampled_failed\n"
	"5:\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size mt_realloc_sampled, .-mt_realloc_sampled\n");

MT_EXPORT void *
reallocarray(void *p, size_t n, size_t size) {
	ENSURE(reallocarray);
	if (!mt_real.reallocarray) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_common(p, n, size, 1, CALLER());
}

MT_EXPORT int
posix_memalign(void **out, size_t align, size_t n) {
	ENSURE(posix_memalign);
	if (!MT_RECORDING())
		return mt_real.posix_memalign(out, align, n);
	mt_self.guard = 1;
	int r = mt_real.posix_memalign(out, align, n);
	if (r == 0) {
		mt_heap_alloc(*out, n, CALLER());
	} else if (r == ENOMEM) {
		int e = errno;
		mt_oom_host("posix_memalign", n);
		errno = e;
	}
	mt_self.guard = 0;
	return r;
}

#define ALIGNED_HOOK(name, params, args, size)                                 \
	MT_EXPORT void *name params {                                          \
		if (MT_UNLIKELY(!mt_real.name)) {                                 \
			if (mt_real_resolving)                                         \
				return NULL;                                   \
			mt_real_resolve();                                             \
		}                                                              \
		if (!MT_RECORDING())                                              \
			return mt_real.name args;                                 \
		mt_self.guard = 1;                                             \
		void *p = mt_real.name args;                                      \
		if (p) {                                                       \
			mt_heap_alloc(p, size, CALLER());                      \
		} else {                                                       \
			OOM(#name, size);                                      \
		}                                                              \
		mt_self.guard = 0;                                             \
		return p;                                                      \
	}

ALIGNED_HOOK(aligned_alloc, (size_t align, size_t n), (align, n), n)
ALIGNED_HOOK(memalign, (size_t align, size_t n), (align, n), n)
ALIGNED_HOOK(valloc, (size_t n), (n), n)
ALIGNED_HOOK(pvalloc, (size_t n), (n), n)
