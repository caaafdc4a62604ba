/*
 * maptab.c — a sorted array of non-overlapping tracked mappings (maptab.h).
 * Mappings are few (thousands) and each costs a syscall and page faults,
 * so a binary search plus memmove under one lock costs little beside
 * them.  The array lives in raw mmap and doubles as needed, up to
 * MEMTALLY_MAX_LIVE entries.
 */
#include "platform/glue.h"
#include "state/maptab.h"
#include "state/sites.h"
#include <string.h>

static struct mt_map *maps;
static uint64_t nmaps, cap, max_maps;
static uint64_t reserved; /* bytes of reserved pieces */
static mt_lock_t map_lock;

int
mt_maptab_init(uint64_t max) {
	max_maps = max;
	return 0;
}

/* A piece's bytes leave: its site's and kind's, or the reservations'. */
static void
uncharge(const struct mt_map *m, int64_t bytes, int count) {
	if (m->reserved) {
		__atomic_sub_fetch(&reserved, (uint64_t)bytes, __ATOMIC_RELAXED);
		return;
	}
	mt_site_free(m->stack, m->kind, bytes, count, 0);
	mt_totals_free(m->kind, (uint64_t)bytes, count);
}

/* First index whose end > addr. */
static uint64_t
lower(uintptr_t addr) {
	uint64_t lo = 0, hi = nmaps;
	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;
		if (maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int
make_room(uint64_t at) {
	if (nmaps == cap) {
		if (cap >= max_maps)
			return ENOMEM;
		uint64_t ncap = cap ? cap * 2 : 256;
		struct mt_map *n = mt_sys_mmap(ncap * sizeof *n);
		if (!n)
			return ENOMEM;
		if (maps) {
			memcpy(n, maps, nmaps * sizeof *n);
			mt_sys_munmap(maps, cap * sizeof *n);
		}
		maps = n;
		cap = ncap;
	}
	memmove(&maps[at + 1], &maps[at], (nmaps - at) * sizeof *maps);
	nmaps++;
	return 0;
}

static void
release_locked(uintptr_t start, uintptr_t end, struct mt_map *first) {
	uint64_t i = lower(start);
	while (i < nmaps && maps[i].start < end) {
		struct mt_map *m = &maps[i];
		if (first && !first->stack) {
			*first = *m;
		}
		uintptr_t lo = m->start > start ? m->start : start;
		uintptr_t hi = m->end < end ? m->end : end;
		int64_t bytes = (int64_t)(hi - lo);
		if (lo == m->start && hi == m->end) { /* whole piece */
			uncharge(m, bytes, m->counted);
			memmove(m, m + 1, (nmaps - i - 1) * sizeof *m);
			nmaps--;
			continue;
		}
		uncharge(m, bytes, 0);
		if (lo == m->start) {
			m->start = hi;
		} else if (hi == m->end) {
			m->end = lo;
		} else { /* hole in the middle: split, tail not counted */
			if (make_room(i + 1)) {
				/* No room: keep the tail charged to the head
				 * piece; it is released when that goes. */
				break;
			}
			m = &maps[i];
			maps[i + 1] = *m;
			maps[i + 1].start = hi;
			maps[i + 1].counted = 0;
			m->end = lo;
			i++;
		}
		i++;
	}
}

void
mt_maptab_release(uintptr_t start, uintptr_t end, struct mt_map *first) {
	mt_lock(&map_lock);
	release_locked(start, end, first);
	mt_unlock(&map_lock);
}

int
mt_maptab_add(const struct mt_map *m) {
	int err;
	mt_lock(&map_lock);
	release_locked(m->start, m->end, NULL); /* MAP_FIXED replaces */
	uint64_t at = lower(m->start);
	err = make_room(at);
	if (!err) {
		maps[at] = *m;
		/* Charged under the lock, so a racing munmap of this range
		 * always uncharges after it. */
		uint64_t bytes = m->end - m->start;
		if (m->reserved) {
			__atomic_add_fetch(&reserved, bytes, __ATOMIC_RELAXED);
		} else {
			mt_site_alloc(m->stack, m->kind, (int64_t)bytes, 1, 0);
			mt_totals_alloc(m->kind, bytes);
		}
	}
	mt_unlock(&map_lock);
	return err;
}

void
mt_maptab_each(void (*fn)(const struct mt_map *, void *), void *arg) {
	mt_lock(&map_lock);
	for (uint64_t i = 0; i < nmaps; i++)
		fn(&maps[i], arg);
	mt_unlock(&map_lock);
}

int
mt_maptab_find(uintptr_t start, uintptr_t end, struct mt_map *m) {
	mt_lock(&map_lock);
	uint64_t i = lower(start);
	int found = i < nmaps && maps[i].start < end;
	if (found)
		*m = maps[i];
	mt_unlock(&map_lock);
	return found;
}

uint64_t
mt_maptab_reserved(void) {
	return __atomic_load_n(&reserved, __ATOMIC_RELAXED);
}

uint64_t
mt_maptab_count(void) {
	return __atomic_load_n(&nmaps, __ATOMIC_RELAXED);
}

uint64_t
mt_maptab_memory(void) {
	return __atomic_load_n(&cap, __ATOMIC_RELAXED) * sizeof(struct mt_map);
}

void
mt_maptab_prefork(void) {
	mt_lock(&map_lock);
}

void
mt_maptab_postfork_parent(void) {
	mt_unlock(&map_lock);
}

void
mt_maptab_postfork_child(int fresh) {
	if (fresh && maps) {
		mt_sys_munmap(maps, cap * sizeof *maps);
		maps = NULL;
		nmaps = cap = 0;
		reserved = 0;
	}
	map_lock.v = 0;
}
