/*
 * events.c — the event ring and the dump count (events.h).
 */
#include "platform/glue.h"
#include "state/events.h"
#include <sys/mman.h>

/* The ring is mapped a chunk at a time as its first lap reaches it (the
 * shim's address space at start stays small: 100,000 events were 4 MB
 * mapped before main); a chunk's pointer is published by compare-and-swap,
 * the loser of a race unmaps its own.  Raw mmap only: no malloc, no lock. */
#define CHUNK 4096u /* events */
#define MAX_CHUNKS ((16777216u + CHUNK - 1) / CHUNK) /* MEMTALLY_TRACE's bound */
static struct mt_ev *chunks[MAX_CHUNKS];
static uint64_t ring_cap, ring_pos;
static uint64_t ndumps;

int
mt_events_init(uint64_t cap) {
	ring_cap = cap < (uint64_t)MAX_CHUNKS * CHUNK ? cap : (uint64_t)MAX_CHUNKS * CHUNK;
	return 0;
}

/* Ring slot i (< ring_cap); its chunk mapped first when make. */
static struct mt_ev *
slot(uint64_t i, int make) {
	uint64_t k = i / CHUNK;
	struct mt_ev *c = __atomic_load_n(&chunks[k], __ATOMIC_ACQUIRE);
	if (!c && make) {
		uint64_t n = ring_cap - k * CHUNK < CHUNK ? ring_cap - k * CHUNK : CHUNK;
		long r = mt_sys(SYS_mmap, 0, n * sizeof *c, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r < 0 && r > -4096)
			return NULL;
		struct mt_ev *none = NULL;
		if (__atomic_compare_exchange_n(&chunks[k], &none, (struct mt_ev *)r, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			c = (struct mt_ev *)r;
		} else {
			mt_sys(SYS_munmap, r, n * sizeof *c, 0, 0, 0, 0);
			c = none;
		}
	}
	return c ? &c[i % CHUNK] : NULL;
}

void
mt_event(int op, int kind, uintptr_t addr, uint64_t size, uint32_t stack) {
	if (!ring_cap)
		return;
	uint64_t pos = __atomic_fetch_add(&ring_pos, 1, __ATOMIC_RELAXED);
	struct mt_ev *e = slot(pos % ring_cap, 1);
	if (!e)
		return;
	__atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
	e->time_ns = mt_now_ns();
	e->addr = addr;
	e->size = size;
	e->stack = stack;
	e->op = (uint8_t)op;
	e->kind = (uint8_t)kind;
	__atomic_store_n(&e->seq, pos + 1, __ATOMIC_RELEASE);
}

void
mt_events_each(void (*fn)(const struct mt_ev *, void *), void *arg) {
	if (!ring_cap)
		return;
	uint64_t end = __atomic_load_n(&ring_pos, __ATOMIC_ACQUIRE);
	uint64_t start = end > ring_cap ? end - ring_cap : 0;
	for (uint64_t p = start; p < end; p++) {
		const struct mt_ev *s = slot(p % ring_cap, 0);
		if (!s)
			continue;
		struct mt_ev e = *s;
		if (e.seq != p + 1)
			continue; /* overwritten or still being written */
		fn(&e, arg);
	}
}

uint64_t
mt_dump_count(void) {
	return __atomic_load_n(&ndumps, __ATOMIC_RELAXED);
}

void
mt_dump_counted(void) {
	__atomic_add_fetch(&ndumps, 1, __ATOMIC_RELEASE);
}

void
mt_events_postfork_child(int follow) {
	(void)follow;
	ring_pos = 0;
	ndumps = 0;
}
