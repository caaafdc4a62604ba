/*
 * chunks.h — arrays indexed by stack id that grow in chunks of 1024 ids,
 * each chunk mapped on first use, so the shim's address space grows with
 * what the program does (a process under RLIMIT_AS or `ulimit -v` must not
 * lose hundreds of MiB to reservations).  Lookups are lock-free: a chunk
 * pointer is published with a release store after the chunk is mapped.
 * Rules: never calls malloc; may run inside malloc, in any thread.
 */
#ifndef MT_CHUNKS_H
#define MT_CHUNKS_H
#include "platform/glue.h"

#define MT_CHUNK_SHIFT 10
#define MT_CHUNK_IDS (1u << MT_CHUNK_SHIFT)
#define MT_MAX_CHUNKS 4096 /* 4 M stack ids */

struct mt_chunked {
	void *dir[MT_MAX_CHUNKS]; /* chunk pointers, NULL until used */
	size_t elem;              /* bytes per id */
	uint64_t mapped;          /* bytes mapped */
};

/* Element for id, or NULL when its chunk is not mapped.  Never allocates. */
static inline void *
mt_chunk_at(struct mt_chunked *c, uint64_t id) {
	if (id >> MT_CHUNK_SHIFT >= MT_MAX_CHUNKS)
		return NULL;
	char *ch = __atomic_load_n(&c->dir[id >> MT_CHUNK_SHIFT], __ATOMIC_ACQUIRE);
	return ch ? ch + (id & (MT_CHUNK_IDS - 1)) * c->elem : NULL;
}

/* Map id's chunk if it is not (callers serialise: one thread ensures a
 * given chunked array at a time).  0 or ENOMEM.  Never allocates via malloc. */
static inline int
mt_chunk_ensure(struct mt_chunked *c, uint64_t id) {
	uint64_t k = id >> MT_CHUNK_SHIFT;
	if (k >= MT_MAX_CHUNKS)
		return ENOMEM;
	if (__atomic_load_n(&c->dir[k], __ATOMIC_ACQUIRE))
		return 0;
	void *p = mt_sys_mmap(MT_CHUNK_IDS * c->elem);
	if (!p)
		return ENOMEM;
	__atomic_add_fetch(&c->mapped, MT_CHUNK_IDS * c->elem, __ATOMIC_RELAXED);
	__atomic_store_n(&c->dir[k], p, __ATOMIC_RELEASE);
	return 0;
}

/* fork child: every mapped chunk replaced by a zeroed one (cheaper than
 * clearing, which would copy each touched page).  Single-threaded.  */
static inline void
mt_chunk_reset(struct mt_chunked *c) {
	for (int k = 0; k < MT_MAX_CHUNKS; k++) {
		if (!c->dir[k])
			continue;
		void *p = mt_sys_mmap(MT_CHUNK_IDS * c->elem);
		if (p) {
			mt_sys_munmap(c->dir[k], MT_CHUNK_IDS * c->elem);
			c->dir[k] = p;
		} else {
			__builtin_memset(c->dir[k], 0, MT_CHUNK_IDS * c->elem);
		}
	}
}

#endif
