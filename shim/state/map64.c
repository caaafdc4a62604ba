/*
 * map64.c — an open-addressing hash map from u64 keys to u32 values
 * (map64.h).
 */
#include "platform/glue.h"
#include "state/map64.h"

#define mix mt_map64_mix

static int
grow(struct mt_map64 *m) {
	uint64_t slots = m->k ? (m->mask + 1) * 2 : 1024;
	uint64_t *k = mt_sys_mmap(slots * sizeof *k);
	uint32_t *v = mt_sys_mmap(slots * sizeof *v);
	if (!k || !v) {
		if (k)
			mt_sys_munmap(k, slots * sizeof *k);
		if (v)
			mt_sys_munmap(v, slots * sizeof *v);
		return ENOMEM;
	}
	m->bytes += slots * (sizeof *k + sizeof *v);
	for (uint64_t i = 0; m->k && i <= m->mask; i++) {
		if (!m->k[i])
			continue;
		uint64_t j = mix(m->k[i]) & (slots - 1);
		while (k[j])
			j = (j + 1) & (slots - 1);
		k[j] = m->k[i];
		v[j] = m->v[i];
	}
	if (m->k) {
		mt_sys_munmap(m->k, (m->mask + 1) * sizeof *m->k);
		mt_sys_munmap(m->v, (m->mask + 1) * sizeof *m->v);
		m->bytes -= (m->mask + 1) * (sizeof *m->k + sizeof *m->v);
	}
	m->k = k;
	m->v = v;
	m->mask = slots - 1;
	return 0;
}

uint32_t
mt_map64_get(const struct mt_map64 *m, uint64_t key) {
	if (!m->k)
		return 0;
	for (uint64_t i = mix(key) & m->mask;; i = (i + 1) & m->mask) {
		if (m->k[i] == key)
			return m->v[i];
		if (!m->k[i])
			return 0;
	}
}

/* Add key -> val in a new slot (the stack index keeps equal hashes side
 * by side; map_put first looks for the key). */
int
mt_map64_insert(struct mt_map64 *m, uint64_t key, uint32_t val) {
	if ((!m->k || (m->used + 1) * 2 > m->mask) && grow(m))
		return ENOMEM;
	uint64_t i = mix(key) & m->mask;
	while (m->k[i])
		i = (i + 1) & m->mask;
	m->k[i] = key;
	m->v[i] = val;
	m->used++;
	return 0;
}

int
mt_map64_put(struct mt_map64 *m, uint64_t key, uint32_t val) {
	for (uint64_t i = m->k ? mix(key) & m->mask : 0; m->k && m->k[i]; i = (i + 1) & m->mask)
		if (m->k[i] == key) {
			m->v[i] = val;
			return 0;
		}
	return mt_map64_insert(m, key, val);
}

/* Backward-shift deletion (no tombstones: code objects come and go). */
int
mt_map64_del(struct mt_map64 *m, uint64_t key) {
	if (!m->k)
		return 0;
	uint64_t i = mix(key) & m->mask;
	while (m->k[i] != key) {
		if (!m->k[i])
			return 0;
		i = (i + 1) & m->mask;
	}
	for (uint64_t j = (i + 1) & m->mask; m->k[j]; j = (j + 1) & m->mask) {
		uint64_t home = mix(m->k[j]) & m->mask;
		/* move j back to i if its home is not in (i, j] */
		if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
			m->k[i] = m->k[j];
			m->v[i] = m->v[j];
			i = j;
		}
	}
	m->k[i] = 0;
	m->used--;
	return 1;
}

