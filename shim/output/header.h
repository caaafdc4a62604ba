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
/* Append a maps record (a dump's: whole, whatever the main file has). */
void mt_maps_json(struct mt_buf *b);
/* The main file's maps record, in two halves around the writer lock
 * (header.c says why): mt_maps_stage, before the writer lock is taken,
 * reads the loader and, when objects were loaded or unloaded since the
 * last record written, formats the record and returns 1 holding the
 * staging lock (only if free; nothing read inside dlclose; a death reads
 * the objects' headers through safe copies; else 0); mt_maps_put, under the
 * writer lock, appends the staged record if the file still lacks it and
 * lets the staging lock go; with nothing staged, a file opened again
 * under the writer lock (mt_maps_forget) gets its record there. */
int mt_maps_stage(int death);
void mt_maps_put(struct mt_buf *b, int staged, int death);
/* A write that ends before its maps: the staging lock let go. */
void mt_maps_release(int staged);
/* fork: the staging lock taken before the writer lock, given back in
 * the parent, reset in the child. */
void mt_maps_prefork(void);
void mt_maps_postfork(int child);
/* The file lacks the last maps record (new, or cut back): write the next
 * one whatever the loader's counts. */
void mt_maps_forget(void);

#endif
