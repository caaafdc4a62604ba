/*
 * snapshot.c — the file's lines, and the snapshot record.  One file per
 * process (file.c names, opens and re-opens it), opened at the first
 * snapshot (so a fork child that only execs leaves no file), with a header
 * line (header.c) written as the file is made, then for each snapshot: a maps record when the set of
 * loaded modules changed (header.c), a stack record for each stack not yet
 * written (callsites.c), and the snapshot record, whose totals, figures
 * and shim counts are made here (its call-site rows by callsites.c).
 * Lines are formatted into mmap'd buffers and leave with write(2), whole
 * lines per call; a snapshot whose write fails is cut off the file.  An
 * OOM dump's content goes through here too (mt_snapshot_dump).  The
 * record layouts are specified in doc/FORMAT.md; bump MT_FORMAT_VERSION
 * when they change.
 */
#include "platform/glue.h"
#include "output/snapshot.h"
#include "output/callsites.h"
#include "output/header.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "capture/charge.h"
#include "output/procstat.h"
#include "capture/python.h"
#include "state/devices.h"
#include "state/marks.h"
#include "output/file.h"
#include "platform/fdio.h"
#include "output/zout.h"
#include "output/prom.h"
#include "output/figures.h"
#include <string.h>

/* The writer's state, all of it under the writer lock (held by the writer
 * thread, or by the thread running exit()). */
static struct {
	mt_lock_t lock;
	int closed;                 /* after the exit snapshot: refuse writes */
	uint64_t seq;               /* the next snapshot's number */
	struct mt_buf out, lines;   /* snapshot line; stack/maps lines */
	uint64_t last_write_ns;     /* how long the last snapshot took */
	char scratch[64 << 10];     /* /proc and /sys reads */
	int full_next;              /* the next snapshot lists every site */
	uint64_t dropped_snaps;     /* snapshots that could not be written */
	int write_warned;
	/* The snapshot line without its call-site rows (zstd files only):
	 * written after the snapshot's frame as a skippable frame of its own,
	 * so a reader that wants totals and marks (memtally ranks, top)
	 * skips the rest of the file undecoded (doc/FORMAT.md). */
	char summary[16 << 10];
	size_t summary_len;         /* 0: none this time */
	unsigned warnings;          /* mt_warn's kept warnings in this file */
	/* Where the file must be cut back to before anything else is
	 * written to it (-1: nowhere): a snapshot whose write failed half
	 * way because the descriptor stopped being our file (the program
	 * closed it and took its number: platform/fdio.h) left its first
	 * part in the file, and could not cut it then. */
	long cut_at;
} W = {.full_next = 1, .cut_at = -1};

/* Cut the file back to off (where a failed write began); if the
 * descriptor is not our file any more, when it is next opened. */
static void
cut_back(int fd, long off) {
	if (off >= 0 && mt_fdio(fd, MT_IO_TRUNCATE, NULL, 0, off))
		W.cut_at = off;
}

int
mt_snapshot_init(char **argv, char **envp) {
	(void)argv;
	(void)envp;
	mt_file_init();
	mt_header_init();
	return 0;
}

static unsigned warnings_json(struct mt_buf *b);

/* A new file's header (and the warnings so far) written at once, a zstd
 * frame of its own: no file is ever empty, and a process killed before
 * its first snapshot is written (or whose first snapshot cannot be
 * written: it is cut back to where it began) leaves a header-only file.
 * If even that write fails the header waits in b for the first snapshot,
 * as before. */
static void
header_now(struct mt_buf *b) {
	int fd = mt_file_fd();
	b->len = 0;
	b->overflow = 0;
	mt_header_json(b);
	unsigned warned = W.warnings;
	W.warnings = warnings_json(b);
	b->flush_fd = fd;
	b->flush_err = 0;
	int err = mt_buf_flush(b);
	if (!err && mt_cfg.compress)
		err = mt_zout_end(fd);
	b->flush_fd = 0;
	b->len = 0;
	b->overflow = 0;
	if (err) {
		cut_back(fd, 0);
		mt_zout_reset();
		W.warnings = warned;
		mt_header_json(b);
	}
}

/* The writer's buffers (2 x 256 KiB, streamed: a snapshot of any size
 * passes through them) and zstd's context (1.6 MiB), mapped when the
 * first snapshot is written, not at start: the shim's address space
 * before main stays small (a program under `ulimit -v` has it as without
 * the shim).  A process that makes its file at start (open_early) maps
 * them for its header and unmaps them after.  ENOMEM when they cannot be
 * had now (the snapshot is dropped and counted; the next one tries
 * again). */
#define WBUF (256u << 10)
static int
buffers(void) {
	if (W.out.p && W.lines.p && (!mt_cfg.compress || mt_zout_memory()))
		return 0;
	if ((!W.out.p && mt_buf_init(&W.out, WBUF)) || (!W.lines.p && mt_buf_init(&W.lines, WBUF)))
		return ENOMEM;
	if (mt_cfg.compress && mt_zout_init()) {
		if (mt_file_made()) /* the file is zstd's: this snapshot waits */
			return ENOMEM;
		mt_warn("no memory for zstd's context: writing plain JSONL (MEMTALLY_COMPRESS ignored)");
		mt_cfg.compress = 0;
	}
	if (mt_cfg.compress) /* the file's lines leave through the compressor */
		W.lines.sink = W.out.sink = mt_zout_write;
	return 0;
}

/* The file open and ours; a new or re-created one gets its header, and
 * every call site, maps and stack record is written again. */
static int
ensure_open(void) {
	int fresh, reopened;
	if (buffers())
		return ENOMEM;
	int err = mt_file_ensure(&fresh, &reopened);
	if (!err && W.cut_at >= 0) {
		/* the same file again (a fresh one has nothing to cut) */
		long end = fresh ? -1 : mt_fdio(mt_file_fd(), MT_IO_SEEK_END, NULL, 0, 0);
		if (end > W.cut_at && mt_fdio(mt_file_fd(), MT_IO_TRUNCATE, NULL, 0, W.cut_at))
			return ESTALE; /* not cut: nothing more may follow it */
		W.cut_at = -1;
	}
	if (err || !reopened)
		return err;
	W.full_next = 1; /* every call site again, and the maps */
	mt_maps_forget();
	struct mt_buf *b = &W.lines;
	b->len = 0;
	if (fresh) {
		mt_callsites_forget();
		W.warnings = 0;
		header_now(b);
	}
	return 0;
}

/* A warning record for each warning kept since the last (mt_warn: the
 * program's stderr has at most one line of ours; the file has them all):
 * {"type":"warning","message":"..."}.  Returns how many were written. */
static unsigned
warnings_json(struct mt_buf *b) {
	unsigned n = mt_warn_count(), i = W.warnings;
	for (; i < n; i++) {
		const char *m = mt_warn_get(i);
		if (!m)
			break; /* being filled: the next snapshot takes it */
		mt_buf_puts(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_WARNING "\"," MT_KEY(MT_F_MESSAGE));
		mt_buf_jstr(b, m);
		mt_buf_puts(b, "}\n");
	}
	return i;
}

/* Whether this process may change its identity: root, or holding
 * CAP_SETUID or CAP_SETGID. */
static int
may_change_identity(void) {
	if (mt_sys(SYS_geteuid, 0, 0, 0, 0, 0, 0) == 0)
		return 1;
	struct { uint32_t version; int pid; } hdr = {0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0};
	struct { uint32_t effective, permitted, inheritable; } data[2];
	if (mt_sys(SYS_capget, &hdr, data, 0, 0, 0, 0))
		return 0;
	return (data[0].effective & ((1u << 6) | (1u << 7))) != 0; /* CAP_SETGID, CAP_SETUID */
}

/* The writer lock let go, the file's descriptor closed first when it may
 * not stay between writes (file.h mt_file_release). */
static void
unlock_released(void) {
	mt_file_release();
	mt_unlock(&W.lock);
}

void
mt_snapshot_open_early(void) {
	if (!mt_cfg.host || !may_change_identity())
		return;
	mt_lock(&W.lock);
	ensure_open(); /* and writes its header */
	/* the buffers again when the first snapshot is written: until then
	 * the process's address space is as without them */
	mt_buf_free(&W.out);
	mt_buf_free(&W.lines);
	mt_zout_free();
	unlock_released();
}

void
mt_snapshot_hold(void) {
	/* a try: a signal handler's set*id must not wait on the lock its
	 * thread holds */
	if (!mt_file_made() || !may_change_identity() || !mt_trylock(&W.lock))
		return;
	if (!W.closed) {
		mt_file_hold();
		ensure_open();
	}
	mt_unlock(&W.lock);
}

/* The snapshot line itself.  dump: for an OOM dump's file (every call
 * site, none of the main file's state touched). */
static void
snapshot_record(struct mt_buf *b, uint64_t sq, const char *reason,
		const char *lab, int dump, char *scr, size_t nscr, const struct mt_allocfig *af) {
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_SNAPSHOT "\"," MT_KEY(MT_F_SEQ) "%lu," MT_KEY(MT_F_REASON) "\"%s\",",
		      (unsigned long)sq, reason);
	if (lab) {
		mt_buf_puts(b, MT_KEY(MT_F_LABEL));
		mt_buf_jstr(b, lab);
		mt_buf_putc(b, ',');
	}
	uint64_t mono = mt_now_ns(), wall = mt_wall_ns();
	if (!dump)
		mt_prom_note_snap(sq, wall);
	mt_buf_printf(b, MT_KEY(MT_F_WALL_NS) "%lu," MT_KEY(MT_F_MONO_NS) "%lu," MT_KEY(MT_F_ELAPSED_MS) "%lu,",
		      (unsigned long)wall, (unsigned long)mono,
		      (unsigned long)((mono - mt_start_mono_ns) / 1000000u));
	/* the cadence's kinds of snapshot: smaps at most once a second */
	int often = !dump && (!strcmp(reason, "step") || !strcmp(reason, "interval") ||
			      !strcmp(reason, "every") || !strcmp(reason, "rise"));
	mt_procstat_json(b, scr, nscr, often, af);
	mt_devices_json(b);
	mt_marks_json(b);
	mt_phases_json(b, !dump);
	mt_figures_totals(b, !dump);
	uint64_t reserved = mt_maptab_reserved();
	if (reserved) /* PROT_NONE: address space, in no kind */
		mt_buf_printf(b, MT_KEY(MT_F_MMAP_RESERVED_BYTES) "%lu,", (unsigned long)reserved);
	/* the summary: what is in b so far (a snapshot line's start is far
	 * below the buffer's size, so nothing was flushed yet) ... */
	size_t pre = b->len;
	int summ = !dump && b == &W.out && pre + 64 < sizeof W.summary &&
		   !__builtin_memcmp(b->p, "{" MT_KEY(MT_F_TYPE), 8);
	W.summary_len = 0;
	if (summ) {
		__builtin_memcpy(W.summary, b->p, pre);
		__builtin_memcpy(W.summary + pre, MT_KEY(MT_F_CALLSITES_MODE) "\"none\"",
				 sizeof(MT_KEY(MT_F_CALLSITES_MODE) "\"none\"") - 1);
		pre += sizeof(MT_KEY(MT_F_CALLSITES_MODE) "\"none\"") - 1;
	}
	mt_callsites_json(b, dump || W.full_next, dump);
	/* ... and the rest of the line, after the rows: flushed first if
	 * the buffer is near full, so the rest stays in it whole */
	if (summ && b->cap - b->len < 8192)
		mt_buf_flush(b);
	size_t post = b->len;
	uint64_t writer_mem = W.out.cap + W.lines.cap + mt_callsites_memory() + mt_zout_memory();
	mt_figures_shim(b, writer_mem, W.dropped_snaps, W.last_write_ns);
	if (summ && b->len >= post && pre + (b->len - post) <= sizeof W.summary && !b->overflow) {
		__builtin_memcpy(W.summary + pre, b->p + post, b->len - post);
		W.summary_len = pre + (b->len - post);
	}
}

/*
 * {"type":"snapshot","seq":3,"reason":"exit","wall_ns":...,"mono_ns":...,
 *  "elapsed_ms":1520,"proc":{...},"heap":{"live_bytes":4096000,...},
 *  "callsites":[{"stack":7,"kind":"heap","live_bytes":4096000,...}],
 *  "shim":{"memory_bytes":...,"stacks":12,"dropped_stacks":0,...}}
 */
/* One snapshot, the writer lock held (and released here).  final: the
 * process's last (the exit snapshot, or one written as a signal kills
 * it): later writes are refused, so nothing follows it in the file. */
/* Whether the snapshot cannot be written (the file closed, not open, or
 * its disk below MEMTALLY_MIN_FREE): then counted as dropped, the lock
 * released. */
static int
refused(const char *reason, int final, int staged) {
	if (W.closed) {
		mt_maps_release(staged);
		mt_unlock(&W.lock);
		return 1;
	}
	int cannot = ensure_open() != 0;
	if (!cannot && !mt_file_below_floor())
		return 0;
	mt_maps_release(staged);
	W.dropped_snaps++; /* the next one written counts it */
	if (!cannot && !strcmp(reason, "exit"))
		W.closed = 1;
	if (final) /* the .prom file still says the process ended */
		mt_prom_after(W.seq, W.dropped_snaps, final);
	unlock_released();
	return 1;
}

static void
write_locked(const char *reason, const char *lab, int final, const struct mt_allocfig *af,
	     int staged) {
	if (refused(reason, final, staged))
		return;
	uint64_t t0 = mt_now_ns();
	/* Everything streams through two 256 KiB buffers, so a snapshot of any
	 * size needs no more memory: first the header (a new file), maps and
	 * every stack record the call sites need (pass 1), then the snapshot
	 * line (pass 2), which may take several write calls.  If a write
	 * fails the file is cut back to where this snapshot began, so it
	 * never holds a broken line in its middle. */
	int fd = mt_file_fd();
	long off0 = mt_fdio(fd, MT_IO_SEEK_END, NULL, 0, 0);
	W.lines.flush_fd = W.out.flush_fd = fd;
	W.lines.flush_err = W.out.flush_err = 0;
	unsigned warned = W.warnings;
	W.warnings = warnings_json(&W.lines);
	mt_maps_put(&W.lines, staged, af->state == MT_AF_DEATH);
	mt_callsites_stacks(&W.lines, W.full_next);
	int err = mt_buf_flush(&W.lines);
	struct mt_buf *b = &W.out;
	b->len = 0;
	b->overflow = 0;
	if (!err) {
		snapshot_record(b, W.seq++, reason, lab, 0, W.scratch, sizeof W.scratch, af);
		err = mt_buf_flush(b);
	}
	if (!err && mt_cfg.compress) /* one frame a snapshot */
		err = mt_zout_end(fd);
	if (!err && mt_cfg.compress && W.summary_len) {
		/* its summary after it: a process killed between the two
		 * leaves a snapshot without one (a reader decodes that
		 * frame), never a summary without its snapshot.  Failing
		 * here costs the summary only. */
		long off1 = mt_fdio(fd, MT_IO_SEEK_END, NULL, 0, 0);
		if (mt_zout_skippable(fd, W.summary, W.summary_len))
			cut_back(fd, off1);
	}
	if (err) {
		if (!W.write_warned++)
			mt_warn("writing %s failed (errno %d); snapshots are dropped while it "
				"fails (the next one written counts them)", mt_file_path(), err);
		cut_back(fd, off0);
		mt_zout_reset(); /* the next snapshot begins a frame of its own */
		W.dropped_snaps++;
	}
	W.lines.flush_fd = W.out.flush_fd = 0;
	if (err) { /* what the file lacks is written again next time */
		mt_callsites_forget();
		mt_maps_forget();
		W.warnings = warned;
	}
	W.full_next = err != 0;
	W.lines.len = W.out.len = 0;
	W.lines.overflow = W.out.overflow = 0;
	W.last_write_ns = mt_now_ns() - t0;
	/* The exit snapshot is the last: the writer thread, waiting on the
	 * lock with an interval snapshot, must not write one after it (the
	 * file then ended at the exit level plus a later one, and the
	 * teardown was read as part of the run).  So is a signal's final
	 * one. */
	if (final)
		W.closed = 1;
	mt_prom_after(W.seq, W.dropped_snaps, final);
	unlock_released();
}

/* A death waits for the writer lock (mt_snapshot_final): other threads'
 * writes give way.  The lock is not fair: two busy threads at
 * MEMTALLY_EVERY=1 took it in turn, and a death's tries found it held for
 * 2 s (1 in 400 random deaths lost its final snapshot). */
static int death_pending;

static int
give_way(void) {
	return __atomic_load_n(&death_pending, __ATOMIC_ACQUIRE);
}

int
mt_snapshot_record(const char *line, size_t n) {
	if (!mt_cfg.host && !mt_devices_used())
		return -1;
	mt_lock(&W.lock);
	if (W.closed || give_way() || ensure_open() || mt_file_below_floor()) {
		unlock_released();
		return -1;
	}
	int fd = mt_file_fd();
	long off0 = mt_fdio(fd, MT_IO_SEEK_END, NULL, 0, 0);
	struct mt_buf *b = &W.lines; /* empty between snapshots */
	b->flush_fd = fd;
	b->flush_err = 0;
	mt_buf_put(b, line, n);
	mt_buf_putc(b, '\n');
	int err = mt_buf_flush(b);
	if (!err && mt_cfg.compress)
		err = mt_zout_end(fd);
	if (err) {
		cut_back(fd, off0);
		mt_zout_reset();
	}
	b->flush_fd = 0;
	b->len = 0;
	b->overflow = 0;
	unlock_released();
	return err ? -1 : 0;
}

void
mt_snapshot_write(const char *reason, const char *lab) {
	/* MEMTALLY_HOST=0: only CUDA is tracked; a process that never used
	 * it leaves no file. */
	if (!mt_cfg.host && !mt_devices_used())
		return;
	/* the allocator's figures first, holding no lock of ours: taking its
	 * locks while holding the writer's could hold up a death's final
	 * snapshot whose thread holds one of them (procstat.h) */
	if (give_way())
		return;
	struct mt_allocfig af;
	mt_procstat_allocator(&af);
	/* the loader's lock, too, before the writer's (header.h) */
	int staged = mt_maps_stage(0);
	mt_lock(&W.lock);
	if (give_way()) { /* (it came while this thread waited) */
		mt_maps_release(staged);
		unlock_released();
		return;
	}
	write_locked(reason, lab, !strcmp(reason, "exit"), &af, staged);
}

int
mt_snapshot_final(const char *reason, uint64_t wait_ns) {
	if (!mt_cfg.host && !mt_devices_used())
		return 1;
	/* Bounded: the lock's holder is another thread (the caller holds no
	 * shim lock), which may itself wait on something the interrupted
	 * code holds (the loader's lock in dl_iterate_phdr). */
	uint64_t deadline = mt_now_ns() + wait_ns;
	__atomic_store_n(&death_pending, 1, __ATOMIC_RELEASE);
	/* the maps staged first, as any snapshot's: nothing inside dlclose,
	 * the staging lock only if free (header.h) */
	int staged = mt_maps_stage(1);
	while (!mt_trylock(&W.lock)) {
		if (mt_now_ns() >= deadline) {
			mt_maps_release(staged);
			return 1;
		}
		mt_sys(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
	}
	if (W.closed) {
		mt_maps_release(staged);
		mt_unlock(&W.lock);
		return 1;
	}
	/* nothing that waits on a lock the dying thread may hold: the
	 * allocator's figures are left out */
	struct mt_allocfig af = {.state = MT_AF_DEATH};
	write_locked(reason, NULL, 1, &af, staged);
	return 0;
}

void
mt_snapshot_close(void) {
	mt_lock(&W.lock);
	W.closed = 1;
	mt_file_close();
	mt_unlock(&W.lock);
}

void
mt_snapshot_prefork(void) {
	mt_maps_prefork(); /* the staging lock before the writer's */
	mt_lock(&W.lock);
}

void
mt_snapshot_postfork_parent(void) {
	mt_unlock(&W.lock);
	mt_maps_postfork(0);
}

void
mt_snapshot_postfork_child(int follow) {
	W.lock.v = 0;
	death_pending = 0;
	mt_maps_postfork(1);
	mt_file_postfork_child();
	W.seq = 0;
	W.dropped_snaps = 0;
	W.write_warned = 0;
	if (!follow) {
		W.closed = 1;
		return;
	}
	/* Stack ids are kept, but the child's file must carry its own stack
	 * records: forget which were written; and its maps (staged before
	 * its first snapshot, not under the writer lock). */
	mt_callsites_reset();
	mt_maps_forget();
	mt_zout_reset();
	W.out.len = W.lines.len = 0;
}

int
mt_snapshot_dump(int dfd, struct mt_buf *b, const char *reason,
		 void (*body)(struct mt_buf *, void *), void *arg, char *scr,
		 size_t nscr) {
	mt_header_json(b);
	mt_maps_json(b);
	mt_py_emit_all(b);
	mt_callsites_stacks_all(b);
	body(b, arg);
	struct mt_allocfig af; /* under the dump's lock, not the writer's */
	mt_procstat_allocator(&af);
	snapshot_record(b, 0, reason, NULL, 1, scr, nscr, &af);
	(void)dfd;
	return mt_buf_flush(b);
}
