/*
 * events.c — the event ring and the dump count (events.h).
 */
#include "platform/glue.h"
#include "state/events.h"
#include <sys/mman.h>

static struct mt_ev *ring;
static uint64_t ring_cap, ring_pos;
static uint64_t ndumps;

int
mt_events_init(uint64_t cap) {
	ring_cap = cap;
	if (!ring_cap)
		return 0;
	long r = mt_sys(SYS_mmap, 0, ring_cap * sizeof *ring, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r < 0 && r > -4096)
		return ENOMEM;
	ring = (struct mt_ev *)r;
	return 0;
}

void
mt_event(int op, int kind, uintptr_t addr, uint64_t size, uint32_t stack) {
	if (!ring)
		return;
	uint64_t pos = __atomic_fetch_add(&ring_pos, 1, __ATOMIC_RELAXED);
	struct mt_ev *e = &ring[pos % ring_cap];
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
	if (!ring)
		return;
	uint64_t end = __atomic_load_n(&ring_pos, __ATOMIC_ACQUIRE);
	uint64_t start = end > ring_cap ? end - ring_cap : 0;
	for (uint64_t p = start; p < end; p++) {
		struct mt_ev e = ring[p % ring_cap];
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
