/* idmap.h — a file's ids to the model's indexes.  Ids in a file are the
 * shim's: dense from 1 in one process, but a fork child's start where its
 * parent's stopped, and a hostile file may name any id.  Each record table
 * is stored dense, in the order records arrive (index 0 is "none"), and an
 * open-addressing map takes a file's id to its index: memory follows the
 * records a file holds, never the size of an id. */
#ifndef MTA_IDMAP_H
#define MTA_IDMAP_H
#include "model/model.h"

/* The index of id, 0 when the map has none. */
uint32_t idmap_get(const struct idmap *m, int64_t id);
void idmap_put(struct idmap *m, int64_t id, uint32_t ix);
void idmap_free(struct idmap *m);
/* The index for a record with this id (1..INT32_MAX, else 0): the one an
 * earlier record of the same id took (the callers refuse an id defined again differently, records.c), else a
 * new zeroed slot at the end of the table *v of *n elements. */
uint32_t idmap_slot(struct idmap *m, void **v, size_t *n, size_t *cap, size_t elem, int64_t id);
/* The slot of module (start, end, path) in f's index, or of the empty
 * slot where it would go: 0 there, else the module's index + 1. */
size_t *mod_slot(struct mfile *f, uint64_t start, uint64_t end, const char *path);

#endif
