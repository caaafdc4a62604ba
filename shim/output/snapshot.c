/*
 * snapshot.c — what goes into the file.  One file per process (file.c
 * names, opens and re-opens it), opened at the first snapshot (so a fork
 * child that only execs leaves no file), with a header line, then for
 * each snapshot: a maps record when the set of
 * loaded modules changed, a stack record for each stack not yet written,
 * and the snapshot record.  Lines are formatted into mmap'd buffers and
 * leave with write(2), whole lines per call.  The record layouts are
 * specified in doc/FORMAT.md; bump MT_FORMAT_VERSION when they change.
 */
#include "platform/glue.h"
#include "output/snapshot.h"
#include "platform/buf.h"
#include "platform/config.h"
#include "state/maptab.h"
#include "state/ptrtab.h"
#include "capture/charge.h"
#include "state/sites.h"
#include "output/procstat.h"
#include "capture/python.h"
#include "state/chunks.h"
#include "state/devices.h"
#include "state/events.h"
#include "state/marks.h"
#include "output/file.h"
#include "output/zout.h"
#include "state/trigger.h"
#include "capture/unwind.h"
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define MT_TOOL_VERSION "0.1.0"


/* What the file already says of each call site: a snapshot after the
 * first lists only the sites whose figures changed ("delta"), so a long
 * run's file grows with activity, not with snapshots x sites.  A site's
 * row is known by a 63-bit signature of the figures that can change
 * (live bytes, allocations, frees, peak, at-peak bytes, which moves
 * without the site changing): 8 bytes a stack where the figures
 * themselves took 48 (34 MiB of a PyTorch process's 700 k stacks).  Two
 * different rows share a signature with odds of 2^-63 a compare. */
struct track {        /* per stack id; writer lock */
	uint64_t sig;     /* bit 0: its stack record is in the file; the
			   * rest: the signature of the last row written, 0
			   * = none */
};
#define TRACK_WRITTEN 1ull

static uint64_t
row_sig(const struct mt_site *c, int64_t at_peak) {
	uint64_t v[5] = {(uint64_t)c->live_bytes, c->allocs, c->frees, (uint64_t)c->peak_bytes,
			 (uint64_t)at_peak};
	uint64_t h = 0x243f6a8885a308d3ull;
	for (int i = 0; i < 5; i++) {
		h ^= v[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	return h | 2; /* never the "no row" signature */
}

struct top { /* call-site candidates when MEMTALLY_TOP limits them */
	int64_t live;
	uint32_t id;
	uint32_t kind;
};

/* The writer's state, all of it under the writer lock (held by the writer
 * thread, or by the thread running exit()). */
static struct {
	mt_lock_t lock;
	int closed;                 /* after the exit snapshot: refuse writes */
	uint64_t seq;               /* the next snapshot's number */
	unsigned long long last_adds, last_subs; /* the loader's counts at the last maps */
	struct mt_buf out, lines;   /* snapshot line; stack/maps lines */
	char exe[1024];
	char cmdline[8192];
	size_t cmdline_len;
	uint64_t last_write_ns;     /* how long the last snapshot took */
	char scratch[64 << 10];     /* /proc and /sys reads */
	struct mt_chunked track;    /* struct track per stack id */
	int full_next;              /* the next snapshot lists every site */
	struct top *topv;           /* MEMTALLY_TOP candidates */
	uint64_t topcap;
	uint64_t dropped_snaps;     /* snapshots that could not be written */
	int write_warned;
	uint32_t pass_stacks;       /* stacks whose records pass 1 considered */
} W = {.last_adds = ~0ull, .last_subs = ~0ull,
       .track = {.elem = sizeof(struct track)}, .full_next = 1};

static struct track *
track_at(uint32_t id) {
	return mt_chunk_ensure(&W.track, id) ? NULL : mt_chunk_at(&W.track, id);
}

int
mt_snapshot_init(char **argv, char **envp) {
	(void)argv;
	(void)envp;
	long r;
	if (mt_buf_init(&W.out, 1 << 20) || mt_buf_init(&W.lines, 1 << 20))
		return ENOMEM;
	if (mt_cfg.compress && mt_zout_init()) {
		mt_warn("no memory for zstd's context: writing plain JSONL (MEMTALLY_COMPRESS ignored)");
		mt_cfg.compress = 0;
	}
	if (mt_cfg.compress) /* the file's lines leave through the compressor */
		W.lines.sink = W.out.sink = mt_zout_write;
	mt_file_init();
	r = mt_sys(SYS_readlink, "/proc/self/exe", W.exe, sizeof W.exe - 1, 0, 0, 0);
	W.exe[r > 0 ? r : 0] = 0;
	r = mt_read_file("/proc/self/cmdline", W.cmdline, sizeof W.cmdline);
	W.cmdline_len = r > 0 ? (size_t)r : 0;
	return 0;
}

static void
header(struct mt_buf *b) {
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_HEADER "\"," MT_KEY(MT_F_VERSION) "%d," MT_KEY(MT_F_TOOL)
			 "\"memtally\"," MT_KEY(MT_F_TOOL_VERSION) "\"%s\"," MT_KEY(MT_F_PID) "%ld,"
			 MT_KEY(MT_F_PPID) "%ld,",
		      MT_FORMAT_VERSION, MT_TOOL_VERSION,
		      mt_sys(SYS_getpid, 0, 0, 0, 0, 0, 0),
		      mt_sys(SYS_getppid, 0, 0, 0, 0, 0, 0));
	static const char *const names[] = {MT_F_RANK, MT_F_LOCAL_RANK, MT_F_WORLD_SIZE};
	long vals[] = {mt_cfg.rank, mt_cfg.local_rank, mt_cfg.world_size};
	for (int i = 0; i < 3; i++) {
		mt_buf_printf(b, "\"%s\":", names[i]);
		if (vals[i] >= 0)
			mt_buf_i64(b, vals[i]);
		else
			mt_buf_puts(b, "null");
		mt_buf_putc(b, ',');
	}
	mt_buf_puts(b, MT_KEY(MT_F_HOST));
	mt_buf_jstr(b, mt_file_host());
	mt_buf_puts(b, "," MT_KEY(MT_F_EXE));
	mt_buf_jstr(b, W.exe);
	mt_buf_puts(b, "," MT_KEY(MT_F_ARGV) "[");
	for (size_t i = 0; i < W.cmdline_len;) {
		size_t n = strnlen(W.cmdline + i, W.cmdline_len - i);
		if (i)
			mt_buf_putc(b, ',');
		mt_buf_jstrn(b, W.cmdline + i, n);
		i += n + 1;
	}
	mt_buf_printf(b, "]," MT_KEY(MT_F_START_WALL_NS) "%lu," MT_KEY(MT_F_START_MONO_NS) "%lu,"
			 MT_KEY(MT_F_SAMPLE_BYTES) "%lu," MT_KEY(MT_F_EXACT_ABOVE_BYTES) "%lu,"
			 MT_KEY(MT_F_PAGE_BYTES) "4096," MT_KEY(MT_F_CONFIG),
		      (unsigned long)mt_start_wall_ns,
		      (unsigned long)mt_start_mono_ns,
		      (unsigned long)mt_cfg.sample,
		      (unsigned long)mt_cfg.exact_above);
	mt_config_json(b);
	mt_buf_puts(b, "}\n");
}


/* The file lacks every stack and Python record (new, re-created, or a
 * write that failed and was cut back): write them again as used. */
static void
forget_written(void) {
	for (uint32_t i = 0; i < mt_stack_count(); i++) {
		struct track *t = mt_chunk_at(&W.track, i);
		if (t)
			t->sig &= ~TRACK_WRITTEN;
	}
	mt_py_forget_written();
}

/* The file open and ours; a new or re-created one gets its header, and
 * every call site, maps and stack record is written again. */
static int
ensure_open(void) {
	int fresh, reopened;
	int err = mt_file_ensure(&fresh, &reopened);
	if (err || !reopened)
		return err;
	W.full_next = 1; /* every call site again, and the maps */
	W.last_adds = W.last_subs = ~0ull;
	struct mt_buf *b = &W.lines;
	b->len = 0;
	if (fresh) {
		header(b);
		forget_written();
	}
	return 0;
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

void
mt_snapshot_open_early(void) {
	if (!mt_cfg.host || !may_change_identity())
		return;
	mt_lock(&W.lock);
	ensure_open(); /* its header waits in W.lines for the first snapshot */
	mt_unlock(&W.lock);
}

/* ---- maps ------------------------------------------------------------ */

struct maps_ctx {
	struct mt_buf *b;
	int n;
	unsigned long long adds, subs;
};

static void
build_id(struct mt_buf *b, const struct dl_phdr_info *info) {
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof *nh;
			const unsigned char *desc = (const unsigned char *)
				name + ((nh->n_namesz + 3) & ~3u);
			if ((const char *)desc + nh->n_descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4)) {
				mt_buf_puts(b, "," MT_KEY(MT_F_BUILD_ID) "\"");
				for (unsigned k = 0; k < nh->n_descsz; k++) {
					mt_buf_putc(b, "0123456789abcdef"[desc[k] >> 4]);
					mt_buf_putc(b, "0123456789abcdef"[desc[k] & 15]);
				}
				mt_buf_putc(b, '"');
				return;
			}
			p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
}

static int
maps_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	struct maps_ctx *c = arg;
	(void)size;
	c->adds = info->dlpi_adds;
	c->subs = info->dlpi_subs;
	const char *name = info->dlpi_name;
	if (!name || !name[0])
		name = c->n == 0 ? W.exe : "[unknown]";
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (c->n++)
			mt_buf_putc(c->b, ',');
		mt_buf_puts(c->b, "{" MT_KEY(MT_F_PATH));
		mt_buf_jstr(c->b, name);
		mt_buf_puts(c->b, "," MT_KEY(MT_F_BASE) "\"");
		mt_buf_hex(c->b, info->dlpi_addr);
		mt_buf_puts(c->b, "\"," MT_KEY(MT_F_START) "\"");
		mt_buf_hex(c->b, lo);
		mt_buf_puts(c->b, "\"," MT_KEY(MT_F_END) "\"");
		mt_buf_hex(c->b, lo + ph->p_memsz);
		mt_buf_puts(c->b, "\"," MT_KEY(MT_F_OFFSET) "\"");
		mt_buf_hex(c->b, ph->p_offset);
		mt_buf_putc(c->b, '"');
		build_id(c->b, info);
		mt_buf_putc(c->b, '}');
	}
	return 0;
}

static void
maps_if_changed(struct mt_buf *b, int always) {
	/* dl_iterate_phdr holds the loader lock around the callback, which
	 * only formats into our buffer: no allocation, no other lock. */
	size_t mark = b->len;
	struct maps_ctx c = {b, 0, 0, 0};
	mt_buf_puts(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_MAPS "\"," MT_KEY(MT_F_MODULES) "[");
	dl_iterate_phdr(maps_cb, &c);
	if (always) {
		mt_buf_puts(b, "]}\n");
		return;
	}
	if (c.adds == W.last_adds && c.subs == W.last_subs) {
		b->len = mark; /* nothing new */
		return;
	}
	W.last_adds = c.adds;
	W.last_subs = c.subs;
	mt_buf_puts(b, "]}\n");
}

/* ---- snapshot -------------------------------------------------------- */

static void
stack_line(struct mt_buf *b, uint32_t id, int mark) {
	int n, keep;
	uint32_t up;
	const uintptr_t *pcs = mt_stack_own(id, &n, &up, &keep);
	uint32_t py = mt_stack_py(id);
	if (mark) /* its Python records first (a dump has written them all) */
		mt_py_emit(b, py);
	/* written piece by piece, not through mt_buf_printf: a snapshot
	 * writes hundreds of thousands of these (and of site_json's rows),
	 * and parsing the format each time was a third of its instructions */
	mt_buf_lit(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_STACK "\"," MT_KEY(MT_F_ID));
	mt_buf_u64(b, id);
	if (mt_py_on) {
		mt_buf_lit(b, "," MT_KEY(MT_F_PY));
		mt_buf_u64(b, py);
	}
	int dev = mt_stack_device(id);
	if (dev >= 0) { /* memory on a GPU: its figures are that device's */
		mt_buf_lit(b, "," MT_KEY(MT_F_DEVICE));
		mt_buf_i64(b, dev);
	}
	if (up) {
		mt_buf_lit(b, "," MT_KEY(MT_F_UP));
		mt_buf_u64(b, up);
		mt_buf_lit(b, "," MT_KEY(MT_F_KEEP));
		mt_buf_i64(b, keep);
	}
	mt_buf_lit(b, "," MT_KEY(MT_F_PCS) "[");
	for (int i = 0; i < n; i++) {
		if (i)
			mt_buf_putc(b, ',');
		mt_buf_putc(b, '"');
		mt_buf_hex(b, pcs[i]);
		mt_buf_putc(b, '"');
	}
	mt_buf_lit(b, "]}\n");
	struct track *t;
	if (mark && (t = track_at(id)))
		t->sig |= TRACK_WRITTEN;
}

/* Stack id's record, after those of the stacks it takes frames from that
 * the file lacks (a fork child's file, or an up that made no allocation
 * since the file began).  The up chain is at most a stack's depth long:
 * each up shares fewer frames than the stack before it. */
static void
stack_line_needed(struct mt_buf *b, uint32_t id) {
	uint32_t chain[MT_MAX_DEPTH + 1];
	int k = 0;
	for (uint32_t u = id; u >= MT_NKINDS && k <= MT_MAX_DEPTH;) {
		struct track *t = track_at(u);
		if (t && (t->sig & TRACK_WRITTEN))
			break;
		chain[k++] = u;
		int nown, keep;
		mt_stack_own(u, &nown, &u, &keep);
	}
	while (k--)
		stack_line(b, chain[k], 1);
}

/* Stack ids below this had their records written by pass 1 of the
 * snapshot being written (a stack born since waits for the next one). */

/* dump: the file holds every stack already (OOM dumps write them all). */
static int
site_json(struct mt_buf *b, uint32_t id, int kind, const struct mt_site *s,
	  int *first, int dump) {
	if (!dump && id >= W.pass_stacks)
		return 0;
	/* A stack interned just before pass 1 but charged only after it had
	 * looked (allocs still 0 then) has no record in the file yet: it waits
	 * for the next snapshot, whose pass 1 writes it (found by test_stress
	 * on a clean-clone CI run: "stack 10 used before its record"). */
	struct track *t;
	if (!dump && id >= MT_NKINDS && (t = track_at(id)) && !(t->sig & TRACK_WRITTEN))
		return 0;
	if (!*first)
		mt_buf_putc(b, ',');
	*first = 0;
	mt_buf_lit(b, "{" MT_KEY(MT_F_STACK)); /* piece by piece: see stack_line */
	mt_buf_u64(b, mt_stack_public(id));
	mt_buf_lit(b, "," MT_KEY(MT_F_KIND) "\"");
	mt_buf_puts(b, mt_kind_names[kind]);
	mt_buf_lit(b, "\"," MT_KEY(MT_F_LIVE_BYTES));
	mt_buf_i64(b, s->live_bytes);
	mt_buf_lit(b, "," MT_KEY(MT_F_LIVE_COUNT));
	mt_buf_i64(b, mt_site_live_count(s));
	mt_buf_lit(b, "," MT_KEY(MT_F_ALLOCS));
	mt_buf_u64(b, s->allocs);
	mt_buf_lit(b, "," MT_KEY(MT_F_ALLOC_BYTES));
	mt_buf_u64(b, s->alloc_bytes);
	mt_buf_lit(b, "," MT_KEY(MT_F_FREES));
	mt_buf_u64(b, s->frees);
	mt_buf_lit(b, "," MT_KEY(MT_F_PEAK_BYTES));
	mt_buf_i64(b, s->peak_bytes);
	mt_buf_lit(b, "," MT_KEY(MT_F_AT_PEAK_BYTES));
	mt_buf_i64(b, mt_site_at_peak(s, mt_stack_peak_slot(id)));
	if (s->peak_ms) { /* stamped: when the peak was reached, and the step */
		mt_buf_lit(b, "," MT_KEY(MT_F_PEAK_MS));
		mt_buf_u64(b, s->peak_ms - 1);
		if (s->peak_step > 0) {
			mt_buf_lit(b, "," MT_KEY(MT_F_PEAK_STEP));
			mt_buf_i64(b, s->peak_step - 1);
		}
	}
	mt_buf_putc(b, '}');
	return 1;
}

/* Keep the MEMTALLY_TOP largest live call sites: a min-heap on live. */
static void
top_push(uint64_t *n, struct top t) {
	uint64_t k = mt_cfg.top;
	if (*n < k) {
		uint64_t i = (*n)++;
		W.topv[i] = t;
		while (i && W.topv[(i - 1) / 2].live > W.topv[i].live) {
			struct top x = W.topv[i];
			W.topv[i] = W.topv[(i - 1) / 2];
			W.topv[(i - 1) / 2] = x;
			i = (i - 1) / 2;
		}
		return;
	}
	if (t.live <= W.topv[0].live)
		return;
	W.topv[0] = t;
	for (uint64_t i = 0;;) {
		uint64_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < k && W.topv[l].live < W.topv[m].live)
			m = l;
		if (r < k && W.topv[r].live < W.topv[m].live)
			m = r;
		if (m == i)
			break;
		struct top x = W.topv[i];
		W.topv[i] = W.topv[m];
		W.topv[m] = x;
		i = m;
	}
}

static void
callsites(struct mt_buf *b, int dump) {
	uint32_t n = mt_stack_count();
	int first = 1, full = W.full_next || dump;
	struct top *tv = dump ? NULL : W.topv;
	if (mt_cfg.top && !W.topv) {
		W.topcap = mt_cfg.top;
		W.topv = mt_sys_mmap(W.topcap * sizeof *W.topv);
	}
	mt_buf_printf(b, MT_KEY(MT_F_CALLSITES_MODE) "\"%s\"," MT_KEY(MT_F_CALLSITES) "[",
		      tv ? MT_MODE_TOP : full ? MT_MODE_FULL : MT_MODE_DELTA);
	uint64_t nt = 0;
	for (uint32_t id = 0; id < n; id++) {
		{
			int k = mt_stack_kind(id), ps = mt_stack_peak_slot(id);
			struct mt_site c; /* racy copies, summed */
			if (!mt_site_read(id, ps, &c))
				continue;
			if (tv) {
				top_push(&nt, (struct top){c.live_bytes, id,
							   (uint32_t)k});
				continue;
			}
			if (dump) { /* complete, and the file's state untouched */
				site_json(b, id, k, &c, &first, 1);
				continue;
			}
			struct track *t = track_at(id);
			if (!t) { /* no memory for the shadow: list it */
				site_json(b, id, k, &c, &first, 0);
				continue;
			}
			uint64_t sig = row_sig(&c, mt_site_at_peak(&c, ps));
			if (!full && (t->sig & ~TRACK_WRITTEN) == (sig & ~TRACK_WRITTEN))
				continue; /* unchanged since the last snapshot */
			if (site_json(b, id, k, &c, &first, 0))
				t->sig = (t->sig & TRACK_WRITTEN) | (sig & ~TRACK_WRITTEN);
		}
	}
	for (uint64_t i = 0; tv && i < nt; i++) {
		struct mt_site c;
		mt_site_read(tv[i].id, mt_stack_peak_slot(tv[i].id), &c);
		site_json(b, tv[i].id, (int)tv[i].kind, &c, &first, 0);
	}
	mt_buf_putc(b, ']');
}

static void
totals(struct mt_buf *b) {
	for (int k = 0; k < MT_NKINDS; k++) {
		struct mt_totals tt = mt_totals[k], *t = &tt;
		if (k == MT_HEAP)
			mt_heap_counts(&tt);
		if (!t->allocs && !t->frees)
			continue;
		mt_buf_printf(b,
			      "\"%s\":{" MT_KEY(MT_F_LIVE_BYTES) "%ld," MT_KEY(MT_F_LIVE_COUNT) "%ld,"
			      MT_KEY(MT_F_ALLOCS) "%lu," MT_KEY(MT_F_ALLOC_BYTES) "%lu," MT_KEY(MT_F_FREES) "%lu,"
			      MT_KEY(MT_F_FREE_BYTES) "%lu," MT_KEY(MT_F_PEAK_BYTES) "%ld",
			      mt_kind_names[k], (long)t->live_bytes,
			      (long)t->live_count, (unsigned long)t->allocs,
			      (unsigned long)t->alloc_bytes,
			      (unsigned long)t->frees,
			      (unsigned long)t->free_bytes, (long)t->peak_bytes);
		if (k == MT_HEAP && mt_cfg.sample)
			mt_buf_puts(b, "," MT_KEY(MT_F_LIVE_ESTIMATED) "true");
		mt_buf_puts(b, "},");
	}
}


/* The snapshot line itself.  dump: for an OOM dump's file (every call
 * site, none of the main file's state touched). */
static void
snapshot_record(struct mt_buf *b, uint64_t sq, const char *reason,
		const char *lab, int dump, char *scr, size_t nscr) {
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_SNAPSHOT "\"," MT_KEY(MT_F_SEQ) "%lu," MT_KEY(MT_F_REASON) "\"%s\",",
		      (unsigned long)sq, reason);
	if (lab) {
		mt_buf_puts(b, MT_KEY(MT_F_LABEL));
		mt_buf_jstr(b, lab);
		mt_buf_putc(b, ',');
	}
	uint64_t mono = mt_now_ns();
	mt_buf_printf(b, MT_KEY(MT_F_WALL_NS) "%lu," MT_KEY(MT_F_MONO_NS) "%lu," MT_KEY(MT_F_ELAPSED_MS) "%lu,",
		      (unsigned long)mt_wall_ns(), (unsigned long)mono,
		      (unsigned long)((mono - mt_start_mono_ns) / 1000000u));
	mt_procstat_json(b, scr, nscr);
	mt_devices_json(b);
	mt_marks_json(b);
	totals(b);
	uint64_t reserved = mt_maptab_reserved();
	if (reserved) /* PROT_NONE: address space, in no kind */
		mt_buf_printf(b, MT_KEY(MT_F_MMAP_RESERVED_BYTES) "%lu,", (unsigned long)reserved);
	callsites(b, dump);
	uint64_t pystacks = 0, pyframes = 0, pyretired = 0, pydropped = 0, pybytes = 0;
	mt_py_stats(&pystacks, &pyframes, &pyretired, &pydropped, &pybytes);
	uint64_t stack_mem, site_mem, sites_mem = mt_sites_memory(&stack_mem, &site_mem);
	uint64_t walk_mem = mt_unwind_memory(); /* the walker's rules: with the stacks */
	stack_mem += walk_mem;
	sites_mem += walk_mem;
	uint64_t live_mem = mt_ptrtab_memory() + mt_maptab_memory();
	uint64_t writer_mem = W.out.cap + W.lines.cap + W.track.mapped + mt_zout_memory();
	mt_buf_printf(b,
		      "," MT_KEY(MT_F_SHIM) "{" MT_KEY(MT_F_MEMORY_BYTES) "%lu," MT_KEY(MT_F_MEMORY) "{" MT_KEY(MT_F_STACKS) "%lu,"
		      MT_KEY(MT_F_SITES) "%lu," MT_KEY(MT_F_LIVE) "%lu," MT_KEY(MT_F_WRITER) "%lu," MT_KEY(MT_F_PYTHON) "%lu},"
		      MT_KEY(MT_F_STACKS) "%u,"
		      MT_KEY(MT_F_LIVE_ENTRIES) "%lu," MT_KEY(MT_F_LIVE_MAPS) "%lu,"
		      MT_KEY(MT_F_DROPPED_STACKS) "%lu," MT_KEY(MT_F_DROPPED_LIVE) "%lu,"
		      MT_KEY(MT_F_OOM_DUMPS) "%lu," MT_KEY(MT_F_DROPPED_SNAPSHOTS) "%lu," MT_KEY(MT_F_LAST_WRITE_NS) "%lu,"
		      MT_KEY(MT_F_UNWIND_FALLBACKS) "%lu," MT_KEY(MT_F_SOLO) "%d," MT_KEY(MT_F_COALESCED) "%lu",
		      (unsigned long)(sites_mem + live_mem + writer_mem + pybytes),
		      (unsigned long)stack_mem, (unsigned long)site_mem, (unsigned long)live_mem,
		      (unsigned long)writer_mem, (unsigned long)pybytes,
		      mt_stack_count() - MT_NKINDS, (unsigned long)mt_ptrtab_count(),
		      (unsigned long)mt_maptab_count(),
		      (unsigned long)mt_sites_dropped,
		      (unsigned long)mt_dropped_live, (unsigned long)mt_dump_count(),
		      (unsigned long)W.dropped_snaps, (unsigned long)W.last_write_ns,
		      (unsigned long)mt_unwind_fallbacks(),
		      __atomic_load_n(&mt_solo.one, __ATOMIC_RELAXED) == 1,
		      (unsigned long)mt_trigger_coalesced());
	if (mt_py_on)
		mt_buf_printf(b, "," MT_KEY(MT_F_PYSTACKS) "%lu," MT_KEY(MT_F_PYFRAMES) "%lu,"
			      MT_KEY(MT_F_PYCODE_RETIRED) "%lu," MT_KEY(MT_F_DROPPED_PYSTACKS) "%lu",
			      (unsigned long)pystacks, (unsigned long)pyframes,
			      (unsigned long)pyretired, (unsigned long)pydropped);
	mt_buf_puts(b, "}}\n");
}

/*
 * {"type":"snapshot","seq":3,"reason":"exit","wall_ns":...,"mono_ns":...,
 *  "elapsed_ms":1520,"proc":{...},"heap":{"live_bytes":4096000,...},
 *  "callsites":[{"stack":7,"kind":"heap","live_bytes":4096000,...}],
 *  "shim":{"memory_bytes":...,"stacks":12,"dropped_stacks":0,...}}
 */
void
mt_snapshot_write(const char *reason, const char *lab) {
	/* MEMTALLY_HOST=0: only CUDA is tracked; a process that never used
	 * it leaves no file. */
	if (!mt_cfg.host && !mt_devices_used())
		return;
	mt_lock(&W.lock);
	if (W.closed) {
		mt_unlock(&W.lock);
		return;
	}
	if (ensure_open()) {
		W.dropped_snaps++;
		mt_unlock(&W.lock);
		return;
	}
	uint64_t t0 = mt_now_ns();
	/* Everything streams through two 1 MiB buffers, so a snapshot of any
	 * size needs no more memory: first the header (a new file), maps and
	 * every stack record the call sites need (pass 1), then the snapshot
	 * line (pass 2), which may take several write calls.  If a write
	 * fails the file is cut back to where this snapshot began, so it
	 * never holds a broken line in its middle. */
	int fd = mt_file_fd();
	long off0 = mt_sys(SYS_lseek, fd, 0, 2 /* SEEK_END */, 0, 0, 0);
	W.lines.flush_fd = W.out.flush_fd = fd;
	W.lines.flush_err = W.out.flush_err = 0;
	maps_if_changed(&W.lines, 0);
	W.pass_stacks = mt_stack_count();
	for (uint32_t id = MT_NKINDS; id < W.pass_stacks; id++) {
		struct track *t = track_at(id);
		if (t && (t->sig & TRACK_WRITTEN))
			continue;
		if (mt_site_charged(id))
			stack_line_needed(&W.lines, id);
	}
	int err = mt_buf_flush(&W.lines);
	struct mt_buf *b = &W.out;
	b->len = 0;
	b->overflow = 0;
	if (!err) {
		snapshot_record(b, W.seq++, reason, lab, 0, W.scratch, sizeof W.scratch);
		err = mt_buf_flush(b);
	}
	if (!err && mt_cfg.compress) /* one frame a snapshot */
		err = mt_zout_end(fd);
	if (err) {
		if (!W.write_warned++)
			mt_warn("writing %s failed (errno %d); snapshots are dropped while it "
				"fails (the next one written counts them)", mt_file_path(), err);
		if (off0 >= 0)
			mt_sys(SYS_ftruncate, fd, off0, 0, 0, 0, 0);
		mt_zout_reset(); /* the next snapshot begins a frame of its own */
		W.dropped_snaps++;
	}
	W.lines.flush_fd = W.out.flush_fd = 0;
	if (err) { /* what the file lacks is written again next time */
		forget_written();
		W.last_adds = W.last_subs = ~0ull;
	}
	W.full_next = err != 0;
	W.lines.len = W.out.len = 0;
	W.lines.overflow = W.out.overflow = 0;
	W.last_write_ns = mt_now_ns() - t0;
	/* The exit snapshot is the last: the writer thread, waiting on the
	 * lock with an interval snapshot, must not write one after it (the
	 * file then ended at the exit level plus a later one, and the
	 * teardown was read as part of the run). */
	if (!strcmp(reason, "exit"))
		W.closed = 1;
	mt_unlock(&W.lock);
}

void
mt_snapshot_close(void) {
	mt_lock(&W.lock);
	W.closed = 1;
	mt_file_close();
	mt_unlock(&W.lock);
}

void
mt_snapshot_describe(void) {
	char mem[4096];
	struct mt_buf b;
	mt_buf_fixed(&b, mem, sizeof mem - 1);
	mt_config_json(&b);
	mem[b.len] = 0;
	mt_say("config %s", mem);
	mt_say("writing %s", mt_file_describe());
}

void
mt_snapshot_prefork(void) {
	mt_lock(&W.lock);
}

void
mt_snapshot_postfork_parent(void) {
	mt_unlock(&W.lock);
}

void
mt_snapshot_postfork_child(int follow) {
	W.lock.v = 0;
	mt_file_postfork_child();
	W.seq = 0;
	W.dropped_snaps = 0;
	W.write_warned = 0;
	if (!follow) {
		W.closed = 1;
		return;
	}
	/* Stack ids are kept, but the child's file must carry its own stack
	 * records: forget which were written. */
	mt_chunk_reset(&W.track);
	mt_py_forget_written();
	mt_zout_reset();
	W.out.len = W.lines.len = 0;
}

int
mt_snapshot_dump(int dfd, struct mt_buf *b, const char *reason,
		 void (*body)(struct mt_buf *, void *), void *arg, char *scr,
		 size_t nscr) {
	header(b);
	maps_if_changed(b, 1);
	mt_py_emit_all(b);
	uint32_t n = mt_stack_count();
	for (uint32_t id = MT_NKINDS; id < n; id++)
		stack_line(b, id, 0);
	body(b, arg);
	snapshot_record(b, 0, reason, NULL, 1, scr, nscr);
	(void)dfd;
	return mt_buf_flush(b);
}
