/*
 * file.h — the per-process output file as a file: its name, making the
 * directory, opening it new (an exec'd image or a reused pid takes the
 * next free ".x<N>" name), checking before each write that the descriptor
 * is still ours (a program may close it and be handed the number, or the
 * directory may be removed), re-opening, and the dump files' names.  What
 * goes into it is snapshot.c's (with header.c and callsites.c).  Output
 * layer: calls the platform only.
 * Rules: never calls malloc; called under the writer lock (the main file)
 * or the dump lock (dumps).
 */
#ifndef MT_FILE_H
#define MT_FILE_H
#include <stddef.h>

/* Read the host name (made safe for a file name).  Never allocates. */
void mt_file_init(void);
const char *mt_file_host(void);

/* The main file open and ours: 0, or an errno value (warned once).
 * *fresh: the file is empty (new or re-created): it needs its header and
 * every stack record again.  *reopened: the descriptor changed. */
int mt_file_ensure(int *fresh, int *reopened);
/* After a write: the descriptor closed when it may not stay (it would
 * take one of the program's: file.c, "keep"); the next mt_file_ensure
 * opens the same file again (neither fresh nor reopened). */
void mt_file_release(void);
/* Keep the descriptor from now on wherever it is (before a change of
 * identity, after which the file may not be opened again). */
void mt_file_hold(void);
/* This image (or fork child) has made its file. */
int mt_file_made(void);
/* Its descriptor (-1 when closed), and its path as last made. */
int mt_file_fd(void);
const char *mt_file_path(void);
/* Make the path as the next open would (MEMTALLY_VERBOSE). */
const char *mt_file_describe(void);
void mt_file_close(void);
/* fork child: a file of its own, opened at its first snapshot. */
void mt_file_postfork_child(void);
/* Whether the open file's filesystem is below the floor of free space
 * (MEMTALLY_DISK_FLOOR, at least 5% of it): no snapshot is written then.
 * Warns once each time it goes below. */
int mt_file_below_floor(void);

/* Open OOM dump idx, <out>/memtally.<host>[.r<rank>].p<pid>.oom<idx>.jsonl,
 * making the directory; its path into dst (named even when it cannot be
 * opened).  The fd (out of the program's range: mt_fdroom_enter), or
 * -errno. */
long mt_file_dump_open(unsigned idx, char *dst, size_t n);

#endif
