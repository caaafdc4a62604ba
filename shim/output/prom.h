/*
 * prom.h — MEMTALLY_PROMETHEUS: each process keeps one file in the
 * Prometheus text exposition format in that directory, for
 * node_exporter's textfile collector (README, "Prometheus"):
 * <dir>/memtally_<host>_<pid>.prom, written whole to a temporary name
 * (".memtally_<host>_<pid>.prom.tmp", which the collector does not read)
 * and renamed over it, so a scrape never reads half a file.  Its figures
 * are those of the snapshot just taken (the same live and peak bytes the
 * snapshot record holds), written at most every
 * MEMTALLY_PROMETHEUS_INTERVAL seconds, and always at the process's last
 * snapshot (exit, or a death's), where memtally_running is 0: the file
 * stays, with the last figures, and dashboards filter on running.  A
 * snapshot the memtally file could not take (counted in
 * memtally_dropped_snapshots_total) still gives its figures here; a last
 * snapshot that could not be taken at all (the file not opened, the disk
 * below MEMTALLY_DISK_FLOOR) leaves the figures before it, running 0.
 * Output layer: calls procstat, file (the host name), the state and
 * capture layers and the platform.
 * Rules: never calls malloc; raw syscalls; a fixed buffer of its own;
 * called by snapshot.c under the writer lock (the writer thread, exit(),
 * or a dying thread's handler, which holds no shim lock: nothing here
 * takes a lock).
 */
#ifndef MT_PROM_H
#define MT_PROM_H
#include <stdint.h>

/* The snapshot being recorded: its number and wall-clock time, and each
 * kind's live and peak bytes as its record says them. */
void mt_prom_note_snap(uint64_t seq, uint64_t wall_ns);
void mt_prom_note_kind(int kind, int64_t live, int64_t peak);
/* After a snapshot was recorded (written or not): the .prom file, when
 * MEMTALLY_PROMETHEUS is set and it is due.  taken: snapshots taken so
 * far; dropped: those that could not be written; final: the process's
 * last (memtally_running 0, always written). */
void mt_prom_after(uint64_t taken, uint64_t dropped, int final);
/* fork: the child writes its own file (role "worker" when the parent
 * records Python frames); follow 0: none. */
void mt_prom_postfork_child(int follow);

#endif
