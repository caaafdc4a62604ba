/*
 * tmem.h — each thread's own tables, in memory of the shim's own.
 *
 * glibc carves every thread's static TLS (the initial-exec variables of
 * every object loaded at start, a preloaded library's included) out of
 * the thread's stack: with 52 KB of the shim's there, a thread asked for
 * with a 16-48 KiB stack failed with EINVAL (Python's
 * threading.stack_size(32768), node's threads).  So the shim's TLS holds
 * only small words and one pointer a module (cfi.c, stacks.c, python.c),
 * and a module's larger per-thread tables are a block of a pool of its
 * own, claimed on the thread's first need (mt_tmem_claim) and reached
 * through that pointer: one load more on the hot path, no test where the
 * module can prove the block is there (cfi.h's recall).
 *
 * The shim is told of no thread's end (a pthread key's destructor would
 * need pthread_setspecific, which allocates for keys past the first 32,
 * and runs before the thread's last frees), so a block is not given back
 * when its thread ends: each block names its owner (pid and tid), and a
 * claim takes the block of an owner that is gone (tgkill(pid, tid, 0):
 * ESRCH) before it maps a new one, looking at a few blocks a claim (from
 * where the last claim stopped: every block is looked at in turn).  A
 * block taken again is zeroed (its pages given back to the kernel,
 * MADV_DONTNEED), so a module finds it as a new thread finds its TLS.
 * Blocks are never unmapped: the memory of threads that ended waits in
 * its pool for the next thread (a program's thread count at its highest
 * is what the pools hold, as glibc's own cache of stacks).
 *
 * fork: the child's one thread keeps its blocks (its TLS pointers, the
 * memory: both are copied), owned again under its new pid and tid
 * (mt_tmem_postfork_child, from life.c's pthread_atfork handler); every
 * other block is free there.  A child made without the handlers (a raw
 * clone, _Fork) leaves its parent's blocks alone for good: a block is
 * taken again only in the process that owned it.
 *
 * Rules: never calls malloc; takes no lock (a claim is raw syscalls and
 * compare-and-swap), so a claim may run in a signal handler, in any
 * thread, before main.  Async-signal-safe.
 */
#ifndef MT_TMEM_H
#define MT_TMEM_H
#include "platform/glue.h"

struct mt_tblock; /* tmem.c: a block's header, before what a claim returns */
struct mt_tpool {
	size_t size;                  /* what a claim returns: bytes, zeroed */
	struct mt_tblock *all;        /* every block, newest first */
	struct mt_tblock *cursor;     /* where the next claim looks first */
	struct mt_tpool *next;        /* the pools that have a block (fork) */
	int listed;                   /* on that list */
	uint64_t mapped;              /* bytes of its blocks */
};
#define MT_TPOOL(bytes) {.size = (bytes)}

/* size bytes, zeroed, 64-byte aligned, for the calling thread alone
 * until it ends: a block a thread that ended held, else a new mapping.
 * NULL when no memory can be mapped.  Async-signal-safe. */
void *mt_tmem_claim(struct mt_tpool *pool);
/* Bytes the pools have mapped.  Never allocates. */
uint64_t mt_tmem_bytes(void);
/* fork child (its one thread): its blocks owned under its new ids, the
 * others free. */
void mt_tmem_postfork_child(void);

#endif
