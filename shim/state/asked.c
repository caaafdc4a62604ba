/*
 * asked.c — the page rounding of mappings per call site (asked.h): an
 * open-addressed table, keys claimed by compare-and-swap, sums added
 * atomically.  Only sites whose calls asked for a length that is not a
 * whole number of pages are here: glibc's and Python's own mappings are
 * whole pages, so the table holds the few that are not.
 */
#include "state/asked.h"
#include <stdint.h>

#define ASKED_N 4096 /* a power of two */

static struct {
	uint64_t key; /* (stack << 8 | kind) + 1; 0: free */
	uint64_t rounding;
} tab[ASKED_N];

static uint64_t
key_of(uint32_t stack, int kind) {
	return ((uint64_t)stack << 8 | (uint8_t)kind) + 1;
}

static unsigned
slot_of(uint64_t key) {
	return (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 52) & (ASKED_N - 1);
}

void
mt_asked_note(uint32_t stack, int kind, uint64_t rounding) {
	uint64_t key = key_of(stack, kind);
	unsigned h = slot_of(key);
	for (unsigned i = 0; i < ASKED_N; i++, h = (h + 1) & (ASKED_N - 1)) {
		uint64_t k = __atomic_load_n(&tab[h].key, __ATOMIC_ACQUIRE);
		if (!k) {
			uint64_t zero = 0;
			if (__atomic_compare_exchange_n(&tab[h].key, &zero, key, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE))
				k = key;
			else
				k = zero; /* another thread took it: with this key? */
		}
		if (k == key) {
			__atomic_add_fetch(&tab[h].rounding, rounding, __ATOMIC_RELAXED);
			return;
		}
	}
	/* full: this site is left out */
}

int
mt_asked_get(uint32_t stack, int kind, uint64_t *out) {
	uint64_t key = key_of(stack, kind);
	unsigned h = slot_of(key);
	for (unsigned i = 0; i < ASKED_N; i++, h = (h + 1) & (ASKED_N - 1)) {
		uint64_t k = __atomic_load_n(&tab[h].key, __ATOMIC_ACQUIRE);
		if (!k)
			return 0;
		if (k == key) {
			*out = __atomic_load_n(&tab[h].rounding, __ATOMIC_RELAXED);
			return 1;
		}
	}
	return 0;
}
