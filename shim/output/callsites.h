/*
 * callsites.h — the call sites in the file (doc/FORMAT.md): the stack
 * records, each written once before the first row that names it, and a
 * snapshot's "callsites" array: every site (full), the sites whose
 * figures changed since the file's last snapshot (delta), or the
 * MEMTALLY_TOP largest (top).
 * Output layer: calls the platform, state and capture layers.
 * Rules: never calls malloc.  What the file already holds of each site is
 * the main file's state, under the writer lock; with dump set (an OOM
 * dump's file, which is written whole) none of it is read or changed.
 */
#ifndef MT_CALLSITES_H
#define MT_CALLSITES_H
#include <stdint.h>

struct mt_buf;
/* Pass 1 of a snapshot: the record of each stack the file lacks that its
 * rows may name (a charged one, and the stacks it takes frames from), with
 * its Python records.  Stacks born after this wait for the next snapshot.
 * It chooses which sites the snapshot reads: every one when full (pass
 * full as to mt_callsites_json), else those that may have changed. */
void mt_callsites_stacks(struct mt_buf *b, int full);
/* A dump's: every stack's record (the Python records written before). */
void mt_callsites_stacks_all(struct mt_buf *b);
/* Append `"callsites_mode":"...","callsites":[...]`.  full: every site (a
 * new file, or a write that failed), else those that changed; dump: every
 * site, the main file's state untouched. */
void mt_callsites_json(struct mt_buf *b, int full, int dump);
/* The file lacks every stack and Python record (new, re-created, or a
 * write that failed and was cut back): write them again as used. */
void mt_callsites_forget(void);
/* A fork child's file: its own stack and Python records, nothing of what
 * the parent's file holds. */
void mt_callsites_reset(void);
/* How many sites the last snapshot of the file read to find its rows. */
uint32_t mt_callsites_read(void);
/* Bytes mapped for what the file holds of each site. */
uint64_t mt_callsites_memory(void);

#endif
