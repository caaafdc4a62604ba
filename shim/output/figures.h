/*
 * figures.h — a snapshot's process-wide figures: each kind's totals and
 * the shim's own record (doc/FORMAT.md "heap", "shim").
 * Output layer: calls the platform, state and capture layers, the call
 * sites' output and the Prometheus file's.
 * Rules: never calls malloc; under the writer lock.
 */
#ifndef MT_FIGURES_H
#define MT_FIGURES_H
#include <stdint.h>

struct mt_buf;
/* Each kind's totals with any allocation or free, `"heap":{...},` and so
 * on; note: pass them to the Prometheus file (a main file's snapshot). */
void mt_figures_totals(struct mt_buf *b, int note);
/* `,"shim":{...}}` closing the snapshot line, with the writer's figures:
 * the bytes its buffers and state hold, snapshots it dropped, the time
 * its last write took. */
void mt_figures_shim(struct mt_buf *b, uint64_t writer_mem, uint64_t dropped_snaps, uint64_t last_write_ns);

#endif
