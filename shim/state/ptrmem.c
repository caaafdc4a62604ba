/*
 * ptrmem.c — where the pointer table's slots live (ptrint.h): the shards,
 * the memory of their tables, and the rehash that takes a table to a new
 * size.  Memory comes from raw mmap, mremap and munmap syscalls, never
 * from a call out of the shim; every function runs under the shard's
 * lock (or by the solo thread: solo.h).
 *
 * A compact table doubles and halves in place (tab_rehash): its
 * mapping grows (inside its reservation, below, or by mremap), the pages
 * it has keep their contents and are not faulted again, and the entries
 * are rehashed where they are.  Made afresh and copied, every doubling
 * faulted in twice the table's pages and unmapped the old ones (a TLB
 * flush on every other CPU the process ran on): `import torch` grows its
 * 64 tables to 16 MiB, 11 k of its 54 k page faults, ~5% of its time in
 * exact mode.  A wide table is made afresh and copied (tab_resize).
 */
#include "platform/glue.h"
#include "state/ptrint.h"
#include <stddef.h>
#include <string.h>

MT_HIDDEN struct shard mt_ptr_shards[NSHARDS];
MT_HIDDEN uint64_t mt_ptr_table_bytes;

/* A shard's compact table that grows to RES_FROM moves to the start of
 * RES_BYTES of address space reserved for it (PROT_NONE, no memory), and
 * from there grows by making the next pages usable and shrinks by giving
 * pages back (tab_rehash): its pages stay where they are, so growing
 * touches only the new half and unmaps nothing.  With mremap alone, 3 of
 * 4 doublings under `import torch` moved the table (the next address was
 * taken), and a moved page is as costly to touch again as a new one in
 * this VM (~2% of the import's time).  4 MiB holds 128 Ki entries a shard
 * (8 Mi blocks of the main heap); a table that outgrows it leaves it for
 * a mapping of its own (mremap).  Smaller tables take no reservation, so
 * a program with few blocks keeps its address space (one with ~100 k
 * live blocks or more has up to 64 x 4 MiB reserved); none is made when
 * the process has an address-space limit (RLIMIT_AS), which the
 * reservations would count against. */
#define RES_FROM ((uint64_t)64 << 10)
#define RES_BYTES ((uint64_t)4 << 20)
static char *res[NSHARDS]; /* a reservation, or NULL */
static int reserving;

static inline char **
res_of(const struct tab *t) {
	return &res[(const struct shard *)((const char *)t - offsetof(struct shard, t)) -
		    mt_ptr_shards];
}

void
mt_ptrmem_init(void) {
	struct {
		uint64_t cur, max;
	} as;
	reserving = mt_sys(SYS_prlimit64, 0, 9 /* RLIMIT_AS */, 0, &as, 0, 0) == 0 &&
		    as.cur == ~0ull;
}

void
mt_ptrmem_unmap(struct tab *t, int wide) {
	size_t bytes = (t->mask + 1) * slot_size(wide);
	char **r = wide ? NULL : res_of(t);
	if (r && *r == t->slot) {
		mt_sys_munmap(*r, RES_BYTES);
		*r = NULL;
	} else {
		mt_sys_munmap(t->slot, bytes);
	}
	mt_add(&mt_ptr_table_bytes, -bytes);
}

/* Rehash into a table of `slots` (a power of two, room for its entries at
 * half load), at n (zeroed, usable memory for it) or in a new mapping. */
static int
tab_resize(struct tab *t, int wide, uint64_t slots, char *n) {
	size_t sz = slot_size(wide);
	if (!n && !(n = mt_sys_mmap(slots * sz)))
		return ENOMEM;
	mt_add(&mt_ptr_table_bytes, slots * sz);
	struct tab nt = {.mask = slots - 1, .slot = n};
	for (uint64_t i = 0; t->mask && i <= t->mask; i++) {
		uintptr_t a = slot_addr(t, wide, i);
		if (!a)
			continue;
		uint64_t j = mt_ptr_hash(a) & (slots - 1);
		while (slot_addr(&nt, wide, j))
			j = (j + 1) & (slots - 1);
		memcpy(n + j * sz, slot_at(t, wide, i), sz);
	}
	if (t->mask)
		mt_ptrmem_unmap(t, wide);
	t->slot = n;
	t->mask = slots - 1;
	return 0;
}

/* Move a compact table to the start of a new reservation, at `slots`. */
static int
tab_reserve(struct tab *t, uint64_t slots) {
	char *b = mt_sys_reserve(RES_BYTES);
	if (!b)
		return ENOMEM;
	if (mt_sys_commit(b, slots * sizeof(struct cslot)) || tab_resize(t, 0, slots, b)) {
		mt_sys_munmap(b, RES_BYTES);
		return ENOMEM;
	}
	*res_of(t) = b;
	return 0;
}

/* Rehash a compact table in place to `slots` (twice or a fraction of
 * its own).  To grow, the next pages of its
 * reservation are made usable, or, for a table with none or that fills
 * it, mremap makes its mapping that size (moving it if it must: its
 * pages go along, the new ones are zero); to shrink, the tail's pages
 * are given back after.  Every entry is
 * marked MOVING, then slot by slot each marked entry goes to the first
 * slot from its new home (below `slots`) that does not hold a placed,
 * unmarked entry: its own slot (it stays), an empty one (it moves), or a
 * marked one (the two swap, and the slot's new entry is taken next).  A
 * placed entry never moves again, and the slots from its home to it held
 * placed entries when it went there, so they still do: every entry stays
 * reachable from its home, as linear probing needs, and the table is one
 * that inserts could have built (backward-shift deletion holds).  A
 * marked entry is only ever moved into the slot being worked on, which
 * takes it at once.  0, or ENOMEM (the table is kept as it was). */
static int
tab_rehash(struct tab *t, uint64_t slots) {
	uint64_t old = t->mask + 1;
	struct cslot *c = t->slot;
	char **r = res_of(t);
	int in_res = *r == (char *)c;
	if (slots > old) {
		if (in_res && slots * sizeof *c <= RES_BYTES) {
			if (mt_sys_commit(c + old, (slots - old) * sizeof *c))
				return ENOMEM;
		} else {
			if (!(c = mt_sys_mremap(c, old * sizeof *c, slots * sizeof *c)))
				return ENOMEM;
			if (in_res) /* it filled the reservation, and is its own mapping now */
				*r = NULL;
			in_res = 0;
		}
	}
	for (uint64_t i = 0; i < old; i++)
		if (c[i].w0)
			c[i].w0 |= MOVING;
	uint64_t m = slots - 1;
	for (uint64_t i = 0; i < old; i++) {
		while (c[i].w0 & MOVING) {
			struct cslot e = {c[i].w0 & ~MOVING, c[i].w1};
			uint64_t j = mt_ptr_hash(key_addr(e.w0)) & m;
			while (c[j].w0 && !(c[j].w0 & MOVING))
				j = (j + 1) & m;
			struct cslot o = c[j]; /* empty, or marked (c[i] itself when j == i) */
			c[j] = e;
			if (j == i)
				break;
			c[i] = o;
		}
	}
	if (slots < old && in_res)
		mt_sys_decommit(c + slots, (old - slots) * sizeof *c);
	else if (slots < old)
		mt_sys_munmap(c + slots, (old - slots) * sizeof *c);
	mt_add(&mt_ptr_table_bytes, (slots - old) * sizeof *c); /* wraps: a decrease */
	t->slot = c;
	t->mask = m;
	return 0;
}

/* A compact table of RES_FROM or more moves into a reservation of its
 * own; one that has memory grows in place; else (a wide table, or the
 * first one) it is made afresh. */
int
mt_ptrmem_grow(struct tab *t, int wide, uint64_t slots) {
	if (!wide && reserving && !*res_of(t) && slots * sizeof(struct cslot) >= RES_FROM &&
	    slots * sizeof(struct cslot) <= RES_BYTES && !tab_reserve(t, slots))
		return 0;
	if (!wide && t->mask && !tab_rehash(t, slots))
		return 0;
	return tab_resize(t, wide, slots, NULL);
}

void
mt_ptrmem_shrink(struct tab *t, int wide, uint64_t slots) {
	if (wide || tab_rehash(t, slots))
		tab_resize(t, wide, slots, NULL); /* no memory for the smaller one: keep the larger */
}
