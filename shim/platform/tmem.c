/*
 * tmem.c — each thread's own tables (tmem.h): blocks of raw mmap, each
 * naming its owner, taken again once the owner is gone.
 *
 * Rules: never calls malloc; takes no lock (the lists only grow, by
 * compare-and-swap; a block changes hands by compare-and-swap of its
 * owner); raw syscalls.  Async-signal-safe.
 */
#include "platform/glue.h"
#include "platform/tmem.h"

#define PAGE 4096
#define HEAD 64 /* the header, padded: what a claim returns is 64-byte aligned */
/* blocks a claim looks at for one whose owner is gone, before it maps a
 * new one: a claim costs a tgkill a block looked at (where every owner
 * lives: a program's threads all running), and the cursor moves on, so
 * a block that comes free is found within (blocks / LOOKS) claims */
#define LOOKS 8

struct mt_tblock {
	struct mt_tblock *next; /* in its pool's list */
	uint64_t owner;         /* pid << 32 | tid of the thread it is for; 0: none */
};

static struct mt_tpool *pools; /* those with a block, for fork */
static uint64_t mapped;        /* every pool's blocks */
/* the owner value the calling thread claims under (0: not yet worked
 * out): a new thread's TLS starts zeroed; a fork child's one thread has
 * it rewritten in mt_tmem_postfork_child */
static MT_TLS uint64_t my_owner;

static uint64_t
ids(void) {
	uint64_t pid = (uint64_t)mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
	uint64_t tid = (uint64_t)mt_sys(SYS_gettid, 0, 0, 0, 0, 0, 0);
	return pid << 32 | (uint32_t)tid;
}

static inline size_t
block_bytes(const struct mt_tpool *pool) {
	return (HEAD + pool->size + PAGE - 1) & ~(size_t)(PAGE - 1);
}

#ifndef MT_TSAN
/* o's thread has ended: it was of this process (me's pid; a block of
 * another process's, seen in a child made without the fork handlers, is
 * never taken) and the kernel knows no thread of it by that tid. */
static int
gone(uint64_t o, uint64_t me) {
	if (o >> 32 != me >> 32)
		return 0;
	return mt_sys(SYS_tgkill, o >> 32, (uint32_t)o, 0, 0, 0, 0) == -ESRCH;
}

/* A block whose owner is gone (or none: freed at fork, or me: a thread
 * that had this tid before), taken for me; NULL if none among the next
 * LOOKS. */
static struct mt_tblock *
reuse(struct mt_tpool *pool, uint64_t me) {
	struct mt_tblock *b = __atomic_load_n(&pool->cursor, __ATOMIC_ACQUIRE);
	if (!b)
		b = __atomic_load_n(&pool->all, __ATOMIC_ACQUIRE);
	for (int i = 0; b && i < LOOKS; i++) {
		uint64_t o = __atomic_load_n(&b->owner, __ATOMIC_ACQUIRE);
		struct mt_tblock *next = b->next ? b->next : __atomic_load_n(&pool->all, __ATOMIC_ACQUIRE);
		if ((o == 0 || o == me || gone(o, me)) && mt_cas(&b->owner, &o, me)) {
			__atomic_store_n(&pool->cursor, next, __ATOMIC_RELEASE);
			return b;
		}
		b = next;
	}
	__atomic_store_n(&pool->cursor, b, __ATOMIC_RELEASE);
	return NULL;
}

/* What a block held for the thread before: zero, as a new mapping is
 * (the pages past the first given back, found zero when next touched). */
static void
zero(struct mt_tblock *b, size_t bytes) {
	size_t first = bytes < PAGE ? bytes : PAGE;
	__builtin_memset((char *)b + HEAD, 0, first - HEAD);
	if (bytes > PAGE &&
	    mt_sys(SYS_madvise, (char *)b + PAGE, bytes - PAGE, 4 /* MADV_DONTNEED */, 0, 0, 0))
		__builtin_memset((char *)b + PAGE, 0, bytes - PAGE);
}
#endif

void *
mt_tmem_claim(struct mt_tpool *pool) {
	uint64_t me = my_owner;
	if (!me)
		my_owner = me = ids();
	size_t bytes = block_bytes(pool);
	struct mt_tblock *b;
#ifndef MT_TSAN /* the unit tests under TSan: every block new (TSan knows
		 * nothing of the order tgkill proves) */
	if ((b = reuse(pool, me))) {
		zero(b, bytes);
		return (char *)b + HEAD;
	}
#endif
	if (!(b = mt_sys_mmap(bytes)))
		return NULL;
	b->owner = me;
	b->next = __atomic_load_n(&pool->all, __ATOMIC_RELAXED);
	while (!mt_cas(&pool->all, &b->next, b))
		;
	mt_add(&pool->mapped, bytes);
	mt_add(&mapped, bytes);
	int no = 0;
	if (mt_cas(&pool->listed, &no, 1)) {
		pool->next = __atomic_load_n(&pools, __ATOMIC_RELAXED);
		while (!mt_cas(&pools, &pool->next, pool))
			;
	}
	return (char *)b + HEAD;
}

uint64_t
mt_tmem_bytes(void) {
	return __atomic_load_n(&mapped, __ATOMIC_RELAXED);
}

void
mt_tmem_postfork_child(void) {
	uint64_t old = my_owner, now = old ? ids() : 0;
	for (struct mt_tpool *p = pools; p; p = p->next) {
		for (struct mt_tblock *b = p->all; b; b = b->next)
			b->owner = old && b->owner == old ? now : 0;
		p->cursor = NULL;
	}
	my_owner = now;
}
