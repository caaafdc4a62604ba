/*
 * header.h — the file's first records (doc/FORMAT.md): the header line
 * (the format and tool versions, the process, its ranks and host, exe and
 * argv, the start times, the sampling sizes, the options), and the maps
 * record: each loaded object's executable segments, with its build id.
 * Output layer: calls the platform, the options and file.c.
 * Rules: never calls malloc.  The maps state (the loader's counts at the
 * last maps record written) is the main file's, under the writer lock; a
 * dump's records read none of it.
 */
#ifndef MT_HEADER_H
#define MT_HEADER_H

struct mt_buf;
/* Read exe and argv (/proc/self/exe, /proc/self/cmdline) for the header. */
void mt_header_init(void);
/* Append the header line. */
void mt_header_json(struct mt_buf *b);
/* Append the maps record: always (a dump's), or when objects were loaded
 * or unloaded since the last one (else nothing). */
void mt_maps_json(struct mt_buf *b, int always);
/* The file lacks the last maps record (new, or cut back): write the next
 * one whatever the loader's counts. */
void mt_maps_forget(void);

#endif
