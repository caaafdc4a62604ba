/*
 * events.h — the event ring OOM dumps carry (mmaps, large heap blocks,
 * device allocations, failures) and the count of dumps written.  State
 * layer: calls only the platform.
 * Rules: never calls malloc; adding an event is lock-free and
 * async-signal-safe.
 */
#ifndef MT_EVENTS_H
#define MT_EVENTS_H
#include <stdint.h>

enum { MT_EV_ALLOC = 1, MT_EV_FREE = 2, MT_EV_OOM = 3 };

struct mt_ev {
	uint64_t seq;    /* ring position + 1, written last (0 = empty/torn) */
	uint64_t time_ns;
	uintptr_t addr;
	uint64_t size;
	uint32_t stack;
	uint8_t op, kind;
	uint16_t pad;
};

/* The ring's size (MEMTALLY_TRACE entries), mapped a chunk at a time as
 * it fills.  0. */
int mt_events_init(uint64_t cap);
/* Add an event (lock-free).  Async-signal-safe. */
void mt_event(int op, int kind, uintptr_t addr, uint64_t size, uint32_t stack);
/* Call fn on each complete event still in the ring, oldest first. */
void mt_events_each(void (*fn)(const struct mt_ev *, void *), void *arg);
/* Dumps written by this process: read by every snapshot, counted by oom.c. */
uint64_t mt_dump_count(void);
void mt_dump_counted(void);
/* fork child: the ring and the count start over. */
void mt_events_postfork_child(int follow);

#endif
