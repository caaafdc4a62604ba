/* idmap.c — ids to indexes (idmap.h), and the index that keeps each
 * module of a file once. */
#include "read/idmap.h"
#include "base/util.h"
#include <stdlib.h>
#include <string.h>

static size_t
id_home(int64_t id, size_t cap) {
	return (size_t)(((uint64_t)id * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

uint32_t
idmap_get(const struct idmap *m, int64_t id) {
	if (!m->cap)
		return 0;
	size_t j = id_home(id, m->cap);
	while (m->ix[j]) {
		if (m->id[j] == id)
			return m->ix[j];
		j = (j + 1) & (m->cap - 1);
	}
	return 0;
}

void
idmap_put(struct idmap *m, int64_t id, uint32_t ix) {
	if ((m->n + 1) * 2 > m->cap) {
		struct idmap g = {0};
		g.cap = m->cap ? m->cap * 2 : 256;
		g.id = xcalloc(g.cap, sizeof *g.id);
		g.ix = xcalloc(g.cap, sizeof *g.ix);
		for (size_t i = 0; i < m->cap; i++)
			if (m->ix[i])
				idmap_put(&g, m->id[i], m->ix[i]);
		free(m->id);
		free(m->ix);
		*m = g;
	}
	size_t j = id_home(id, m->cap);
	while (m->ix[j] && m->id[j] != id)
		j = (j + 1) & (m->cap - 1);
	if (!m->ix[j])
		m->n++;
	m->id[j] = id;
	m->ix[j] = ix;
}

void
idmap_free(struct idmap *m) {
	free(m->id);
	free(m->ix);
	memset(m, 0, sizeof *m);
}

uint32_t
idmap_slot(struct idmap *m, void **v, size_t *n, size_t *cap, size_t elem, int64_t id) {
	if (id < 1 || id > INT32_MAX)
		return 0;
	uint32_t ix = idmap_get(m, id);
	if (ix)
		return ix;
	int first = *n == 0;
	if (first)
		*n = 1; /* index 0: no record */
	*v = xgrow(*v, *n + 1, cap, elem);
	memset((char *)*v + (first ? 0 : *n * elem), 0, first ? 2 * elem : elem);
	ix = (uint32_t)(*n)++;
	idmap_put(m, id, ix);
	return ix;
}

static size_t
mod_home(uint64_t start, uint64_t end, size_t cap) {
	uint64_t h = (start * 0x9e3779b97f4a7c15ull) ^ end;
	return (size_t)(h >> 7) & (cap - 1);
}

/* The index doubles at half full.  Keeping each module once was a scan
 * of all before it: quadratic on 300 k modules. */
size_t *
mod_slot(struct mfile *f, uint64_t start, uint64_t end, const char *path) {
	if ((f->nmods + 1) * 2 > f->modix_cap) {
		size_t cap = f->modix_cap ? f->modix_cap * 2 : 256;
		size_t *ix = xcalloc(cap, sizeof *ix);
		for (size_t i = 0; i < f->nmods; i++) {
			size_t j = mod_home(f->mods[i].start, f->mods[i].end, cap);
			while (ix[j])
				j = (j + 1) & (cap - 1);
			ix[j] = i + 1;
		}
		free(f->modix);
		f->modix = ix;
		f->modix_cap = cap;
	}
	size_t j = mod_home(start, end, f->modix_cap);
	while (f->modix[j]) {
		const struct module *m = &f->mods[f->modix[j] - 1];
		if (m->start == start && m->end == end && !strcmp(m->path, path))
			break;
		j = (j + 1) & (f->modix_cap - 1);
	}
	return &f->modix[j];
}
