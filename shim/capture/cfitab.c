/*
 * cfitab.c — the shared rule table (cfitab.h states its protocol).
 */
#include "platform/glue.h"
#include "capture/cfi.h"
#include "capture/cfitab.h"

#define SMALL_BITS 12 /* 64 KiB: a small program's rules */
#define TAB_BITS 17   /* 2 MiB */
#define PROBES 16
#define PC_MASK ((1ull << 48) - 1)
#define GEN_SHIFT 48
#define GEN_MASK MT_CFI_GEN_MASK
#define PENDING (1ull << 63)

struct entry {
	uint64_t key;
	uint64_t rule;
};

/* The table in use: the small one at start, the full one once the small
 * one is half full or a neighbourhood in it is (one thread maps it; the
 * rules are found again as the walks need them).  The small one's pages
 * are given back then (madvise): a reader still in it finds its entries
 * empty, a miss, and a put into it is lost, as a full neighbourhood's. */
static struct level {
	struct entry *e;
	unsigned bits;
} levels[2] = {{NULL, SMALL_BITS}, {NULL, TAB_BITS}};
static struct level *cur;
static uint64_t small_used;
static int grown; /* the full table was asked for (once) */
uint64_t mt_cfi_gen;
/* the table's pages that hold an entry: its memory as the process sees it */
#define TAB_PAGES (((uint64_t)1 << TAB_BITS) * sizeof(struct entry) / 4096)
static uint64_t touched[TAB_PAGES / 64], touched_bytes;

static inline uint64_t
pc_hash(uintptr_t pc, unsigned bits) {
	uint64_t h = (uint64_t)pc * 0x9e3779b97f4a7c15ull;
	return h >> (64 - bits);
}

static void
grow(void) {
	if (__atomic_exchange_n(&grown, 1, __ATOMIC_ACQ_REL))
		return;
	struct entry *big = mt_sys_mmap(((size_t)1 << TAB_BITS) * sizeof *big);
	if (!big)
		return; /* the small one stays */
	struct level *small = &levels[0];
	levels[1].e = big;
	__atomic_store_n(&cur, &levels[1], __ATOMIC_RELEASE);
	mt_sys(SYS_madvise, small->e, ((size_t)1 << SMALL_BITS) * sizeof *big, 4 /* MADV_DONTNEED */, 0,
	       0, 0);
	for (uint64_t i = 0; i < TAB_PAGES / 64; i++)
		__atomic_store_n(&touched[i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&touched_bytes, 0, __ATOMIC_RELAXED);
}

int
mt_cfitab_get(uintptr_t pc, uint64_t g, uint64_t *r) {
	const struct level *L = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	struct entry *tab = L->e;
	uint64_t mask = ((uint64_t)1 << L->bits) - 1;
	uint64_t want = (uint64_t)pc | g << GEN_SHIFT;
	uint64_t i = pc_hash(pc, L->bits);
	for (int k = 0; k < PROBES; k++, i = (i + 1) & mask) {
		struct entry *e = &tab[i];
		uint64_t key = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
		if (key == want) {
			uint64_t w = __atomic_load_n(&e->rule, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) != want)
				return 0;
			*r = w;
			return 1;
		}
		if (!key)
			return 0;
	}
	return 0;
}

void
mt_cfitab_put(uintptr_t pc, uint64_t g, uint64_t r) {
	const struct level *L = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	struct entry *tab = L->e;
	uint64_t mask = ((uint64_t)1 << L->bits) - 1;
	uint64_t i = pc_hash(pc, L->bits);
	for (int k = 0; k < PROBES; k++, i = (i + 1) & mask) {
		struct entry *e = &tab[i];
		uint64_t key = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
		int stale = key && !(key & PENDING) && (key >> GEN_SHIFT & GEN_MASK) != g;
		if (key && !stale) {
			if ((key & PC_MASK) == pc)
				return; /* there, or being put there */
			continue;
		}
		uint64_t claim = (uint64_t)pc | g << GEN_SHIFT | PENDING;
		if (!__atomic_compare_exchange_n(&e->key, &key, claim, 0, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&e->rule, r, __ATOMIC_RELAXED);
		__atomic_store_n(&e->key, claim & ~PENDING, __ATOMIC_RELEASE);
		uint64_t pg = i * sizeof *e / 4096, bit = 1ull << (pg & 63);
		if (!(__atomic_fetch_or(&touched[pg >> 6], bit, __ATOMIC_RELAXED) & bit))
			__atomic_add_fetch(&touched_bytes, 4096, __ATOMIC_RELAXED);
		if (L == &levels[0] && !key &&
		    __atomic_add_fetch(&small_used, 1, __ATOMIC_RELAXED) > (mask + 1) / 2)
			grow();
		return;
	}
	if (L == &levels[0])
		grow(); /* a full neighbourhood */
}

int
mt_cfitab_init(void) {
	if (!levels[0].e) {
		levels[0].e = mt_sys_mmap(((size_t)1 << SMALL_BITS) * sizeof(struct entry));
		if (levels[0].e)
			__atomic_store_n(&cur, &levels[0], __ATOMIC_RELEASE);
	}
	return levels[0].e != NULL;
}

uint64_t
mt_cfi_memory(void) {
	return __atomic_load_n(&touched_bytes, __ATOMIC_RELAXED);
}

void
mt_cfi_forget(void) {
	uint64_t n = __atomic_add_fetch(&mt_cfi_gen, 1, __ATOMIC_ACQ_REL);
	const struct level *L = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	if (L && !(n & GEN_MASK)) /* the keys' generation wrapped */
		for (uint64_t i = 0; i < (uint64_t)1 << L->bits; i++)
			__atomic_store_n(&L->e[i].key, 0, __ATOMIC_RELAXED);
}
