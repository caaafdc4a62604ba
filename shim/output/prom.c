/*
 * prom.c — the MEMTALLY_PROMETHEUS file (prom.h): one exposition of a
 * process's figures, for node_exporter's textfile collector.  The series
 * a process has are bounded whatever it does: 13 of its own, two per GPU
 * it used, and at most MEMTALLY_PROMETHEUS_TOP (<= 10) call sites.
 */
#include "platform/glue.h"
#include "output/prom.h"
#include "output/file.h"
#include "output/procstat.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "capture/python.h"
#include "state/devices.h"
#include "state/marks.h"
#include "state/sites.h"
#include <fcntl.h>
#include <string.h>

#define PROM_TOP_MAX 10

/* All under the writer lock (snapshot.c). */
static struct {
	uint64_t seq, wall_ns;           /* the snapshot noted */
	int64_t live[MT_NKINDS], peak[MT_NKINDS];
	uint64_t last_ns;                /* the last write (monotonic), 0: none */
	uint64_t write_ns;               /* how long the last write took */
	int worker;                      /* a fork child of a Python process */
	int warned;
	char labels[768];                /* job="...",rank="...",... */
	char mem[32 << 10];              /* the exposition */
	char scratch[8192];              /* /proc and cgroup reads */
} P;

void
mt_prom_note_snap(uint64_t seq, uint64_t wall_ns) {
	P.seq = seq;
	P.wall_ns = wall_ns;
	for (int k = 0; k < MT_NKINDS; k++)
		P.live[k] = P.peak[k] = 0;
}

void
mt_prom_note_kind(int kind, int64_t live, int64_t peak) {
	if (kind >= 0 && kind < MT_NKINDS) {
		P.live[kind] = live;
		P.peak[kind] = peak;
	}
}

void
mt_prom_postfork_child(int follow) {
	P.last_ns = P.write_ns = 0;
	P.warned = 0;
	if (follow && mt_py_on)
		P.worker = 1;
}

/* A label value: backslash, double quote and newline escaped. */
static void
label_value(struct mt_buf *b, const char *s) {
	mt_buf_putc(b, '"');
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			mt_buf_putc(b, '\\');
		if (*s == '\n') {
			mt_buf_puts(b, "\\n");
			continue;
		}
		mt_buf_putc(b, *s);
	}
	mt_buf_putc(b, '"');
}

static void
make_labels(long pid) {
	struct mt_buf b;
	mt_buf_fixed(&b, P.labels, sizeof P.labels - 1);
	/* the host as the memtally file names it (dots as '_'), so that
	 * `memtally metrics` gives the same label */
	const char *host = mt_file_host();
	mt_buf_puts(&b, "job=");
	label_value(&b, mt_cfg.job);
	if (mt_cfg.rank >= 0)
		mt_buf_printf(&b, ",rank=\"%ld\"", mt_cfg.rank);
	if (mt_cfg.local_rank >= 0)
		mt_buf_printf(&b, ",local_rank=\"%ld\"", mt_cfg.local_rank);
	mt_buf_puts(&b, ",host=");
	label_value(&b, host);
	mt_buf_printf(&b, ",pid=\"%ld\",role=\"%s\"", pid, P.worker ? "worker" : "main");
	P.labels[b.overflow ? 0 : b.len] = 0;
}

static void
head(struct mt_buf *b, const char *name, const char *type, const char *help) {
	mt_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{labels[,extra]} value */
static void
sample(struct mt_buf *b, const char *name, const char *extra, int64_t v) {
	mt_buf_printf(b, "%s{%s%s%s} ", name, P.labels, extra ? "," : "", extra ? extra : "");
	mt_buf_i64(b, v);
	mt_buf_putc(b, '\n');
}

static void
gauge(struct mt_buf *b, const char *name, const char *help, int64_t v) {
	head(b, name, "gauge", help);
	sample(b, name, NULL, v);
}

/* VmRSS of /proc/self/status in bytes, or -1. */
static int64_t
rss_bytes(void) {
	long fd = mt_sys(SYS_open, "/proc/self/status", O_RDONLY | O_CLOEXEC, 0, 0, 0, 0);
	if (fd < 0)
		return -1;
	long n = mt_sys(SYS_read, fd, P.scratch, sizeof P.scratch - 1, 0, 0, 0);
	mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
	if (n <= 0)
		return -1;
	P.scratch[n] = 0;
	const char *p = strstr(P.scratch, "\nVmRSS:");
	if (!p)
		return -1;
	for (p += 7; *p == ' ' || *p == '\t'; p++)
		;
	int64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (*p - '0');
	return v * 1024;
}

/* The innermost frame of stack id, or 0.  A stack keeps its own
 * innermost frames, then the outermost `keep` frames of an earlier stack
 * `up` (stacks.h): frame i of id is its own pcs[i], else frame
 * (up's total - keep) + (i - own) of up, and so on down the chain. */
static uintptr_t
innermost(uint32_t id) {
	int i = 0;
	for (int hop = 0; hop < 64 && id >= MT_NKINDS; hop++) {
		int n, keep;
		uint32_t up;
		const uintptr_t *pcs = mt_stack_own(id, &n, &up, &keep);
		if (i < n)
			return pcs ? pcs[i] : 0;
		if (!up || keep <= 0)
			return 0;
		int un, ukeep;
		uint32_t uup;
		mt_stack_own(up, &un, &uup, &ukeep);
		i = un + ukeep - keep + (i - n);
		if (i < 0)
			return 0;
		id = up;
	}
	return 0;
}

/* The line series: live bytes summed by (innermost frame, kind), over
 * every call site (sites that differ only in their callers are one
 * series: a series twice in a file makes node_exporter refuse the whole
 * collection).  A table of its own, rebuilt at each write; frames past
 * its fill limit are left out (counted in none). */
#define AGG_SLOTS 4096
struct agg {
	uintptr_t pc;
	int32_t kind, used;
	int64_t live;
};
static struct agg agg[AGG_SLOTS];

/* The n largest (frame, kind) sums, largest first, into t. */
static int
top_lines(struct agg *t, int n) {
	if (n <= 0)
		return 0;
	memset(agg, 0, sizeof agg);
	unsigned fill = 0;
	uint32_t ids = mt_stack_count();
	for (uint32_t id = 0; id < ids; id++) {
		struct mt_site c;
		if (!mt_site_read(id, mt_stack_peak_slot(id), &c) || c.live_bytes <= 0)
			continue;
		uintptr_t pc = innermost(id);
		int k = mt_stack_kind(id);
		uint64_t h = ((uint64_t)pc ^ ((uint64_t)k << 56)) * 0xff51afd7ed558ccdull;
		for (unsigned x = (unsigned)(h >> 52) % AGG_SLOTS;; x = (x + 1) % AGG_SLOTS) {
			struct agg *a = &agg[x];
			if (a->used && a->pc == pc && a->kind == k) {
				a->live += c.live_bytes;
				break;
			}
			if (!a->used) {
				if (fill >= AGG_SLOTS * 3 / 4)
					break; /* full: this frame is left out */
				*a = (struct agg){pc, k, 1, c.live_bytes};
				fill++;
				break;
			}
		}
	}
	int have = 0;
	for (unsigned x = 0; x < AGG_SLOTS; x++) {
		if (!agg[x].used || (have == n && agg[x].live <= t[n - 1].live))
			continue;
		int i = have < n ? have++ : n - 1;
		for (; i > 0 && t[i - 1].live < agg[x].live; i--)
			t[i] = t[i - 1];
		t[i] = agg[x];
	}
	return have;
}

/* One gauge family a used device: its live bytes, or (total) the device's
 * memory as the driver said it, where it said so. */
static void
devices(struct mt_buf *b, const char *name, const char *help, int total) {
	int any = 0;
	for (int d = 0; d < MT_MAXDEV; d++) {
		int64_t v = total ? (int64_t)__atomic_load_n(&mt_devs[d].drv_total, __ATOMIC_RELAXED)
				  : __atomic_load_n(&mt_devs[d].live_bytes, __ATOMIC_RELAXED);
		if (!__atomic_load_n(&mt_devs[d].used, __ATOMIC_RELAXED) || (total && !v))
			continue;
		char dl[32];
		struct mt_buf x;
		mt_buf_fixed(&x, dl, sizeof dl - 1);
		mt_buf_printf(&x, "device=\"%d\"", d);
		dl[x.len] = 0;
		if (!any++)
			head(b, name, "gauge", help);
		sample(b, name, dl, v);
	}
}

static void
exposition(struct mt_buf *b, uint64_t taken, uint64_t dropped, int final) {
	static const char *const kinds[] = MT_KIND_NAMES;
	gauge(b, "memtally_heap_live_bytes", "Heap bytes allocated and not freed (malloc family), at the last snapshot.",
	      P.live[MT_HEAP]);
	gauge(b, "memtally_heap_peak_bytes", "Highest heap live bytes of the process so far, at the last snapshot.",
	      P.peak[MT_HEAP]);
	gauge(b, "memtally_mmap_live_bytes", "Anonymous mmap bytes mapped and not unmapped, at the last snapshot.",
	      P.live[MT_MMAP]);
	devices(b, "memtally_device_live_bytes",
		"Bytes allocated through the CUDA driver on the device and not freed.", 0);
	devices(b, "memtally_device_total_bytes",
		"The device's memory as the driver last said it (cuMemGetInfo total).", 1);
	int64_t rss = rss_bytes();
	if (rss >= 0)
		gauge(b, "memtally_rss_bytes", "Resident set size of the process (VmRSS).", rss);
	uint64_t cur = ~0ull, max = 0;
	int lim = mt_cfg.cgroup ? mt_cgroup_usage(&cur, &max, P.scratch, sizeof P.scratch) : -1;
	if (cur != ~0ull)
		gauge(b, "memtally_cgroup_usage_bytes", "Memory usage of the process's cgroup.", (int64_t)cur);
	if (!lim)
		gauge(b, "memtally_cgroup_limit_bytes", "Memory limit of the process's cgroup (absent: none).", (int64_t)max);
	double step;
	if (!mt_mark_get("step", &step)) {
		head(b, "memtally_step", "gauge", "The \"step\" mark (memtally_mark; PyTorch's optimizer steps under memtally run).");
		mt_buf_printf(b, "memtally_step{%s} ", P.labels);
		mt_buf_double(b, step, 3);
		mt_buf_putc(b, '\n');
	}
	head(b, "memtally_snapshots_total", "counter", "Snapshots taken by the process.");
	sample(b, "memtally_snapshots_total", NULL, (int64_t)taken);
	head(b, "memtally_dropped_snapshots_total", "counter", "Snapshots that could not be written to the memtally file.");
	sample(b, "memtally_dropped_snapshots_total", NULL, (int64_t)dropped);
	gauge(b, "memtally_last_snapshot_seq", "The number (seq) of the snapshot these figures are from in the process's memtally file.",
	      (int64_t)P.seq);
	head(b, "memtally_last_snapshot_timestamp_seconds", "gauge", "Wall-clock time of the snapshot these figures are from.");
	mt_buf_printf(b, "memtally_last_snapshot_timestamp_seconds{%s} %lu.", P.labels,
		      (unsigned long)(P.wall_ns / 1000000000u));
	char ns[16];
	struct mt_buf x;
	mt_buf_fixed(&x, ns, sizeof ns);
	mt_buf_u64(&x, 1000000000u + P.wall_ns % 1000000000u);
	mt_buf_put(b, ns + 1, 9);
	mt_buf_putc(b, '\n');
	if (P.write_ns) { /* the cost of this file: the last write's (make bench) */
		head(b, "memtally_prometheus_write_seconds", "gauge",
		     "How long the previous write of this file took (the call sites' scan included).");
		mt_buf_printf(b, "memtally_prometheus_write_seconds{%s} ", P.labels);
		mt_buf_double(b, (double)P.write_ns / 1e9, 6);
		mt_buf_putc(b, '\n');
	}
	gauge(b, "memtally_running", "1 while the process runs; 0 in the file its last snapshot (exit, or a death by signal) left.",
	      !final);
	struct agg t[PROM_TOP_MAX];
	int n = top_lines(t, (int)(mt_cfg.prometheus_top < PROM_TOP_MAX ? mt_cfg.prometheus_top : PROM_TOP_MAX));
	if (n)
		head(b, "memtally_line_live_bytes", "gauge",
		     "Live bytes by innermost frame, the frames with the most (at most 10 a process); where: the frame's address (memtally metrics names it).");
	for (int i = 0; i < n; i++) {
		char extra[96];
		mt_buf_fixed(&x, extra, sizeof extra - 1);
		uintptr_t pc = t[i].pc;
		mt_buf_puts(&x, "where=\"");
		if (pc)
			mt_buf_hex(&x, pc);
		else
			mt_buf_puts(&x, "unknown");
		mt_buf_printf(&x, "\",kind=\"%s\"", kinds[t[i].kind]);
		extra[x.len] = 0;
		sample(b, "memtally_line_live_bytes", extra, t[i].live);
	}
}

/* The file's name in the directory: memtally_<host>_<pid>.prom, with a
 * leading dot and ".tmp" after for the temporary one. */
static void
name(char *dst, size_t n, long pid, int tmp) {
	struct mt_buf b;
	mt_buf_fixed(&b, dst, n - 1);
	mt_buf_printf(&b, "%smemtally_%s_%ld.prom%s", tmp ? "." : "", mt_file_host(), pid,
		      tmp ? ".tmp" : "");
	dst[b.overflow ? 0 : b.len] = 0;
}

static void
fail(const char *what, long err) {
	if (!P.warned++)
		mt_warn("MEMTALLY_PROMETHEUS: %s %s failed (errno %ld); the .prom file is not written "
			"while it fails", what, mt_cfg.prometheus, -err);
}

void
mt_prom_after(uint64_t taken, uint64_t dropped, int final) {
	if (!mt_cfg.prometheus[0])
		return;
	uint64_t now = mt_now_ns();
	if (!final && P.last_ns && now - P.last_ns < (uint64_t)(mt_cfg.prometheus_interval * 1e9))
		return;
	P.last_ns = now;
	long pid = mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0);
	make_labels(pid);
	struct mt_buf b;
	mt_buf_fixed(&b, P.mem, sizeof P.mem);
	exposition(&b, taken, dropped, final);
	if (b.overflow) {
		fail("the exposition (too long) for", -ENOSPC);
		return;
	}
	char tmp[300], fin[300];
	name(tmp, sizeof tmp, pid, 1);
	name(fin, sizeof fin, pid, 0);
	struct mt_fdroom room;
	mt_fdroom_enter(&room);
	long dfd = mt_sys(SYS_open, mt_cfg.prometheus, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0, 0);
	if (dfd == -ENOENT) {
		mt_sys(SYS_mkdir, mt_cfg.prometheus, 0755, 0, 0, 0, 0);
		dfd = mt_sys(SYS_open, mt_cfg.prometheus, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0, 0);
	}
	long fd = -1;
	if (dfd >= 0) {
		dfd = mt_fd_high_in(dfd, &room);
		/* a new file each time (never through a name planted there) */
		mt_sys(SYS_unlinkat, dfd, tmp, 0, 0, 0, 0);
		fd = mt_sys(SYS_openat, dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0644, 0, 0);
		if (fd >= 0)
			fd = mt_fd_high_in(fd, &room);
	}
	mt_fdroom_leave(&room);
	if (dfd < 0) {
		fail("opening", dfd);
		return;
	}
	if (fd < 0) {
		mt_sys(SYS_close, dfd, 0, 0, 0, 0, 0);
		fail("creating a file in", fd);
		return;
	}
	int err = mt_write_all((int)fd, b.p, b.len);
	mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
	long r = err ? -err : mt_sys(SYS_renameat2, dfd, tmp, dfd, fin, 0, 0);
	if (r < 0) {
		mt_sys(SYS_unlinkat, dfd, tmp, 0, 0, 0, 0);
		fail("writing in", r);
	}
	mt_sys(SYS_close, dfd, 0, 0, 0, 0, 0);
	P.write_ns = mt_now_ns() - now;
}
