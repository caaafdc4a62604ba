/*
 * cfitab.c — the shared rule table (cfitab.h states its protocol).
 */
#include "platform/glue.h"
#include "capture/cfi.h"
#include "capture/cfitab.h"

#define TAB_BITS 17
#define TAB_SIZE ((uint64_t)1 << TAB_BITS)
#define PROBES 16
#define PC_MASK ((1ull << 48) - 1)
#define GEN_SHIFT 48
#define GEN_MASK MT_CFI_GEN_MASK
#define PENDING (1ull << 63)

struct entry {
	uint64_t key;
	uint64_t rule;
};

static struct entry *tab;
uint64_t mt_cfi_gen;
/* the table's pages that hold an entry: its memory as the process sees it */
#define TAB_PAGES (TAB_SIZE * sizeof(struct entry) / 4096)
static uint64_t touched[TAB_PAGES / 64], touched_bytes;

static inline uint64_t
pc_hash(uintptr_t pc) {
	uint64_t h = (uint64_t)pc * 0x9e3779b97f4a7c15ull;
	return h >> (64 - TAB_BITS);
}

int
mt_cfitab_get(uintptr_t pc, uint64_t g, uint64_t *r) {
	uint64_t want = (uint64_t)pc | g << GEN_SHIFT;
	uint64_t i = pc_hash(pc);
	for (int k = 0; k < PROBES; k++, i = (i + 1) & (TAB_SIZE - 1)) {
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
	uint64_t i = pc_hash(pc);
	for (int k = 0; k < PROBES; k++, i = (i + 1) & (TAB_SIZE - 1)) {
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
		return;
	}
}

int
mt_cfitab_init(void) {
	if (!tab)
		tab = mt_sys_mmap(TAB_SIZE * sizeof *tab);
	return tab != NULL;
}

uint64_t
mt_cfi_memory(void) {
	return __atomic_load_n(&touched_bytes, __ATOMIC_RELAXED);
}

void
mt_cfi_forget(void) {
	uint64_t n = __atomic_add_fetch(&mt_cfi_gen, 1, __ATOMIC_ACQ_REL);
	if (tab && !(n & GEN_MASK)) /* the keys' generation wrapped */
		for (uint64_t i = 0; i < TAB_SIZE; i++)
			__atomic_store_n(&tab[i].key, 0, __ATOMIC_RELAXED);
}
