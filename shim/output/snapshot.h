/*
 * snapshot.h — the per-process JSONL file: header, maps, stack and snapshot
 * records (doc/FORMAT.md), each line written whole with write(2).
 *
 * THE OUTPUT LAYER (output/): what leaves the process.  Calls the
 * platform, state and capture layers, and within the folder only down
 * this list:
 *   file.c, zout.c   the output file (name, descriptor, re-opening) and
 *                    its zstd frames
 *   procstat.c       /proc and cgroup figures
 *   header.c,        the header and maps records (header.h); the stack
 *   callsites.c      records and a snapshot's call-site rows (callsites.h):
 *                    neither calls the other
 *   snapshot.c       this header: the file's lines and the snapshot record
 *                    (doc/FORMAT.md)
 *   oom.c            OOM and pre-OOM dumps
 *   writer.c         the writer thread (writer.h)
 * Called by the entry points (exit, exec, OOM) and the lifecycle.
 *
 * Rules: never calls malloc; may run in any thread.  Every function that
 * writes takes the writer lock; it is called from the writer thread, or
 * from exit(), never from a hook; from a signal handler only
 * mt_snapshot_final, by a thread that holds no shim lock.
 */
#ifndef MT_SNAPSHOT_H
#define MT_SNAPSHOT_H
#include <stddef.h>
#include <stdint.h>

/* Reserve buffers, read host, exe and argv.  0 or ENOMEM.  Never allocates. */
int mt_snapshot_init(char **argv, char **envp);
/* Write one snapshot (and the header, maps and stacks it needs).  label
 * names a request (C API) or is NULL.  Takes the writer lock. */
void mt_snapshot_write(const char *reason, const char *label);
/* The last snapshot of a process a signal is about to kill, written by
 * the thread that took the signal, from its handler (entry/signals.c),
 * which holds no shim lock.  Waits at most wait_ns for the writer lock
 * (another thread's snapshot in progress), then gives up.  Later writes
 * are refused.  0 written; 1 not (file closed, no lock in time, or a
 * write that failed is counted as the exit's would be).  Never
 * allocates; async-signal-safe given no shim lock held by the caller. */
int mt_snapshot_final(const char *reason, uint64_t wait_ns);
/* At start, in a process that may change identity (root, CAP_SETUID or
 * CAP_SETGID): make the file now, with the checks of file.c, while the
 * process still has the identity it started with; a drop to another user
 * before the first snapshot then still finds its file open. */
void mt_snapshot_open_early(void);
/* Before a change of identity: the file (made already) open and kept
 * from now on, even where its descriptor takes one of the program's
 * (file.h mt_file_hold), since it may not be opened again after. */
void mt_snapshot_hold(void);
/* Append one record line (n bytes, no newline; the caller checked it is a
 * JSON object on one line) to the file, under the writer lock, between
 * snapshots: a zstd file gets a frame of its own.  0, or -1 when the file
 * is closed (after the exit snapshot), cannot be opened, is below the
 * disk floor or the write failed (the file is cut back).  Not from a
 * signal handler. */
int mt_snapshot_record(const char *line, size_t n);
/* Refuse further writes (after the exit snapshot).  Takes the writer lock. */
void mt_snapshot_close(void);
/* OOM dumps (oom.c, which opens the file with mt_file_dump_open): write
 * its content through a streaming buffer b: header, maps, every stack,
 * body(), then a complete snapshot with this reason.  Does not take the writer lock and
 * touches none of the main file's state.  Returns 0 or an errno value.
 * Never allocates. */
struct mt_buf;
int mt_snapshot_dump(int fd, struct mt_buf *b, const char *reason,
		     void (*body)(struct mt_buf *, void *), void *arg, char *scratch,
		     size_t nscratch);
void mt_snapshot_prefork(void);
void mt_snapshot_postfork_parent(void);
/* follow: a new file for the child (opened at its first snapshot). */
void mt_snapshot_postfork_child(int follow);

#endif
