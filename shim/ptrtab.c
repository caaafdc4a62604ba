/*
 * ptrtab.c — the sharded pointer table (ptrtab.h).  Linear probing with
 * backward-shift deletion (no tombstones, so a long-running process never
 * degrades).  A shard starts empty, is mapped on first insert, doubles at
 * half load up to its share of MEMTALLY_MAX_LIVE, and halves when it
 * falls to an eighth (shrink_if_sparse).
 * Entries are removed before the real free runs (the caller's order), so
 * another thread cannot be handed the same address while it is still here.
 */
#include "glue.h"
#include "ptrtab.h"
#include <string.h>

#define NSHARDS 64
#define MIN_SLOTS 256

struct shard {
	mt_lock_t lock;
	uint64_t mask;       /* slots - 1, or 0 before first use */
	uint64_t count;      /* entries */
	struct mt_ptr *slot; /* [mask + 1] */
	char pad[32];        /* one cache line per shard */
};

static struct shard shards[NSHARDS];
static uint64_t shard_cap;  /* entries a shard may hold */
static uint64_t table_bytes;

int
mt_ptrtab_init(uint64_t max_live) {
	shard_cap = max_live / NSHARDS;
	if (shard_cap < 16)
		shard_cap = 16;
	return 0;
}

static inline uint64_t
hash_addr(uintptr_t a) {
	uint64_t h = (uint64_t)a * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

static inline struct shard *
shard_of(uint64_t h) {
	return &shards[h >> 58]; /* top 6 bits: NSHARDS == 64 */
}

/* Rehash the shard into a table of `slots` (a power of two, room for its
 * entries at half load).  Under the shard's lock; mmap and munmap are raw
 * syscalls, never a call out of the shim. */
static int
resize(struct shard *s, uint64_t slots) {
	struct mt_ptr *n = mt_sys_mmap(slots * sizeof *n);
	if (!n)
		return ENOMEM;
	mt_add(&table_bytes, slots * sizeof *n);
	if (s->mask) {
		for (uint64_t i = 0; i <= s->mask; i++) {
			struct mt_ptr *e = &s->slot[i];
			if (!e->addr)
				continue;
			uint64_t j = hash_addr(e->addr) & (slots - 1);
			while (n[j].addr)
				j = (j + 1) & (slots - 1);
			n[j] = *e;
		}
		mt_sys_munmap(s->slot, (s->mask + 1) * sizeof *n);
		mt_add(&table_bytes, -(s->mask + 1) * sizeof *n);
	}
	s->slot = n;
	s->mask = slots - 1;
	return 0;
}

static int
grow(struct shard *s) {
	return resize(s, s->mask ? (s->mask + 1) * 2 : MIN_SLOTS);
}

/* A shard that emptied to an eighth of its slots halves until a quarter
 * are used: a table that grew for a peak (PyTorch's import: hundreds of
 * thousands of blocks) does not stay that size for the rest of a run.
 * Between the grow at a half and this there is a factor of two each way,
 * so a count that moves up and down rehashes rarely (amortised O(1)). */
static void
shrink_if_sparse(struct shard *s) {
	uint64_t slots = s->mask + 1;
	if (slots <= MIN_SLOTS || s->count * 8 >= slots)
		return;
	while (slots > MIN_SLOTS && s->count * 4 <= slots / 2)
		slots /= 2;
	resize(s, slots); /* no memory for the smaller one: keep the larger */
}

int
mt_ptrtab_put(const struct mt_ptr *e, struct mt_ptr *replaced) {
	uint64_t h = hash_addr(e->addr);
	struct shard *s = shard_of(h);
	int err = 0;
	mt_lock(&s->lock);
	if ((s->count + 1) * 2 > s->mask + 1) {
		if (s->count >= shard_cap || grow(s)) {
			err = ENOMEM;
			goto out;
		}
	}
	uint64_t i = h & s->mask;
	while (s->slot[i].addr) {
		if (s->slot[i].addr == e->addr) {
			/* A stale entry (the address was released behind our
			 * back, e.g. by a raw syscall): hand it back so the
			 * caller uncharges its site, and replace it. */
			*replaced = s->slot[i];
			s->slot[i] = *e;
			err = EEXIST;
			goto out;
		}
		i = (i + 1) & s->mask;
	}
	s->slot[i] = *e;
	s->count++;
out:
	mt_unlock(&s->lock);
	return err;
}

int
mt_ptrtab_take(uintptr_t addr, struct mt_ptr *out) {
	uint64_t h = hash_addr(addr);
	struct shard *s = shard_of(h);
	int found = 0;
	mt_lock(&s->lock);
	if (!s->mask)
		goto out;
	uint64_t i = h & s->mask;
	for (;;) {
		uintptr_t a = s->slot[i].addr;
		if (!a)
			goto out;
		if (a == addr)
			break;
		i = (i + 1) & s->mask;
	}
	*out = s->slot[i];
	found = 1;
	s->count--;
	/* Backward-shift deletion: pull later entries of the run into the
	 * hole when their home slot is not between the hole and them. */
	for (uint64_t j = (i + 1) & s->mask;; j = (j + 1) & s->mask) {
		if (!s->slot[j].addr)
			break;
		uint64_t home = hash_addr(s->slot[j].addr) & s->mask;
		if (((j - home) & s->mask) >= ((j - i) & s->mask)) {
			s->slot[i] = s->slot[j];
			i = j;
		}
	}
	s->slot[i].addr = 0;
	shrink_if_sparse(s);
out:
	mt_unlock(&s->lock);
	return found;
}

void
mt_ptrtab_each(void (*fn)(const struct mt_ptr *, void *), void *arg) {
	for (int i = 0; i < NSHARDS; i++) {
		struct shard *s = &shards[i];
		mt_lock(&s->lock);
		for (uint64_t k = 0; s->mask && k <= s->mask; k++)
			if (s->slot[k].addr)
				fn(&s->slot[k], arg);
		mt_unlock(&s->lock);
	}
}

uint64_t
mt_ptrtab_count(void) {
	uint64_t n = 0;
	for (int i = 0; i < NSHARDS; i++)
		n += __atomic_load_n(&shards[i].count, __ATOMIC_RELAXED);
	return n;
}

uint64_t
mt_ptrtab_memory(void) {
	return __atomic_load_n(&table_bytes, __ATOMIC_RELAXED);
}

void
mt_ptrtab_prefork(void) {
	for (int i = 0; i < NSHARDS; i++)
		mt_lock(&shards[i].lock);
}

void
mt_ptrtab_postfork_parent(void) {
	for (int i = 0; i < NSHARDS; i++)
		mt_unlock(&shards[i].lock);
}

void
mt_ptrtab_postfork_child(int fresh) {
	for (int i = 0; i < NSHARDS; i++) {
		struct shard *s = &shards[i];
		if (fresh && s->mask) {
			mt_sys_munmap(s->slot, (s->mask + 1) * sizeof *s->slot);
			s->slot = NULL;
			s->mask = 0;
			s->count = 0;
		}
		s->lock.v = 0;
	}
	if (fresh)
		table_bytes = 0;
}
