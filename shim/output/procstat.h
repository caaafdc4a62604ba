/*
 * procstat.h — the figures that tell a leak from fragmentation from page
 * cache: process (/proc/self/status, smaps_rollup, threads, fds), cgroup
 * (v2, or v1's memory controller) and allocator (glibc mallinfo2, or
 * jemalloc's mallctl stats when jemalloc is the allocator).
 * Rules: never calls malloc; reads /proc and /sys with raw syscalls into
 * the caller's scratch buffer.  Called from the writer thread or an OOM
 * dump, never from a hook's fast path.
 */
#ifndef MT_PROCSTAT_H
#define MT_PROCSTAT_H
#include <stddef.h>
#include <stdint.h>

struct mt_buf;
/* Find the cgroup and the allocator (constructor).  Never allocates. */
void mt_procstat_init(void);
/* The allocator's own figures (glibc's mallinfo2, or jemalloc's mallctl
 * stats), read before a snapshot takes the writer lock: reading them takes
 * the allocator's locks, and a thread that waits for one while it holds
 * the writer lock can hold up a dying thread's final snapshot (the dying
 * thread may hold that very arena lock: a double free found inside
 * free()).  Never read in a death's handler (state MT_AF_DEATH). */
enum { MT_AF_NONE, MT_AF_GLIBC, MT_AF_JEMALLOC, MT_AF_DEATH };
struct mt_allocfig {
	int state;
	uint64_t v[6]; /* the six figures of FORMAT.md, in its order */
	unsigned have; /* bit i: v[i] read (jemalloc's may fail one by one) */
};
/* Read them now; call holding no shim lock.  Never allocates. */
void mt_procstat_allocator(struct mt_allocfig *f);
/* Append `"proc":{...},"cgroup":{...},"allocator":{...},` (absent files are
 * absent fields).  scratch: >= 64 KiB.  Never allocates.  often: a
 * snapshot of the cadence's kind (step, interval, every, rise), whose
 * smaps_rollup figures come at most once a second.  af: the allocator's
 * figures as read (MT_AF_DEATH: left out, `"omitted":"death"`). */
void mt_procstat_json(struct mt_buf *b, char *scratch, size_t n, int often,
		      const struct mt_allocfig *af);
/* cgroup memory usage and limit in bytes; 0 when known, -1 when there is no
 * cgroup memory limit.  Never allocates. */
int mt_cgroup_usage(uint64_t *current, uint64_t *max, char *scratch, size_t n);

/* Whether sig is pending for the process or this thread (/proc/self/
 * status ShdPnd, SigPnd): at exit, the snapshot signal pending means the
 * program blocked it everywhere.  Never allocates. */
int mt_signal_pending(int sig);

#endif
