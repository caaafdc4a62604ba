/* html_int.h — what the parts of `memtally html` share: html.c assembles
 * the page and each process's data; html_timeline.c writes the time series
 * (the totals, the devices, where growth starts) and html_tables.c the data
 * by call site (the stacked timeline, the tables at several moments).  idx
 * holds the kept snapshots (indices into f->snaps, m of them), as
 * html_kept_snaps chose them; every part of a process uses the same. */
#ifndef MTA_HTML_INT_H
#define MTA_HTML_INT_H
#include "cmd/cmd.h"
#include "base/util.h"

/* The snapshots the timelines show: all, or at most 1000 evenly spaced
 * with the first, the last and the peak kept; into idx (f->nsnaps + 1
 * of room), the count returned. */
size_t html_kept_snaps(const struct mfile *f, size_t *idx);

/* ,"nsnaps","downsampled","snapshots":{the series of the kept snapshots,
 * "dev":{each device used}} */
void html_series_json(struct sb *j, const struct mfile *f, const size_t *idx, size_t m);

/* ,"marks_start","growth_step" when the live bytes rise steadily from a
 * step on; nothing otherwise. */
void html_growth_start(struct sb *j, const struct mfile *f);
/* ,"phases":[[name, begin_ms, end_ms, step]...]: the phases the timeline shows */
void html_phases_json(struct sb *j, const struct mfile *f);

/* ,"stack":{"sites":[...]}: the timeline by call site, l's first suspects
 * marked. */
void html_stack_json(struct sb *j, struct mfile *f, const struct leaks *l, const size_t *idx,
		     size_t m);

/* ,"tables":[...],"rows":[...],"frames":[...]: the call-site table at the
 * opening moment and at the kept snapshots the control moves through. */
void html_moments_json(struct sb *j, struct mfile *f, struct opts *o, const size_t *idx, size_t m);

#endif
