/* model.h — what the analysis knows of a run: one struct mfile per process
 * file, read by load.c from the records of doc/FORMAT.md. */
#ifndef MTA_MODEL_H
#define MTA_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "shim/format.h"

#define K_ENUM_(e, n) K_##e,
enum { MT_KINDS(K_ENUM_) NKINDS };
#undef K_ENUM_
extern const char *const kind_names[NKINDS];
int kind_parse(const char *s); /* -1 if unknown */
/* Whether memory of kind k lives on one GPU (cuda, cuda_managed,
 * cuda_vmm: their call sites are a device's each; pinned host memory's
 * are not). */
static inline int
kind_on_device(int k) {
	return k == K_CUDA || k == K_CUDA_MANAGED || k == K_CUDA_VMM;
}

struct site {
	uint32_t stack;       /* index into its file's stacks; 0: none */
	uint8_t kind;
	int64_t live_bytes, live_count, allocs, alloc_bytes, frees, peak_bytes;
	int64_t at_peak_bytes; /* live when its kind's total was at its peak; -1: not written */
	int64_t peak_ms;       /* when peak_bytes was reached (ms from start); -1: not written */
	double peak_step;      /* the step mark then; NAN: none or not written */
	int64_t asked_bytes;   /* a mapping site: the lengths its calls asked for
				* (alloc_bytes counts whole pages); -1: not
				* written, the same as alloc_bytes */
};

struct totals {
	int present;
	int64_t live_bytes, live_count, allocs, alloc_bytes, frees, free_bytes, peak_bytes;
	int peak_phase;        /* the phase its peak was reached in: index + 1
				* into the file's phase names; 0: none */
	double peak_step;      /* the step then, NAN: none */
};

#define MAX_MARKS 8
struct markval { char *name; double value; };

/* A phase's span (the snapshots' "phases"): name an index into the
 * file's phase names; begin and end ms since the start; the step at its
 * begin (NAN: none). */
struct phasespan { int name; int64_t b_ms, e_ms; double step; };
#define MAX_PHASES 16
/* The step's workload (the snapshot's "workload"): its numbers (tokens,
 * batch_bytes, the program's meta; "step" left out) and its shapes as
 * text ("4x355, 4x355"), NULL when it said none. */
#define MAX_WORK 8
struct workload { struct markval v[MAX_WORK]; int n; char *shapes; };


struct snap {
	int64_t seq;
	char reason[16];
	char *label;           /* request label or NULL */
	int64_t wall_ns, mono_ns, elapsed_ms;
	int64_t rss_bytes, vms_bytes;   /* -1 when absent */
	int64_t pss_bytes, cg_current;  /* -1 when absent */
	int64_t cg_max;                 /* -1 when absent or no limit */
	int64_t alloc_footprint;        /* allocator's own footprint, -1 when absent */
#define MAX_DEVS 16
	int64_t dev_live[MAX_DEVS];     /* per CUDA device, -1 when absent */
	int64_t dev_peak[MAX_DEVS];     /* per CUDA device, -1 when absent */
	int64_t dev_total[MAX_DEVS];    /* the driver's total (cuMemGetInfo), -1 when absent */
	struct devtorch *torch;         /* PyTorch's caching allocator per device */
	int ntorch;                     /* (devices[].torch), when any */
	struct totals tot[NKINDS];
	struct site *sites;    /* as written: see mode; use snap_sites() */
	size_t nsites;
	int mode;              /* SITES_FULL, SITES_DELTA (changed since the
				* previous snapshot), SITES_TOP (largest only) */
	struct markval marks[MAX_MARKS]; /* latest mark values at this snapshot */
	int nmarks;
	int phase;             /* the phase open at it: index + 1 into the file's
				* phase names; 0: none */
	struct workload work;  /* the latest workload (n 0: none) */
	int64_t dropped_stacks, dropped_live, shim_bytes;
	int64_t dropped_snaps; /* snapshots the file could not take, so far */
	int64_t coalesced;     /* snapshot requests merged into others so far */
	int64_t reserved_bytes; /* PROT_NONE address space (in no kind) */
	int line;              /* line number in the file */
};

enum { SITES_FULL, SITES_DELTA, SITES_TOP };

/* Whether s is the final snapshot of a process a signal killed (reason
 * "signal-term", "signal-int", ...; shim/format.h): the state the
 * process held when it was killed, the real end of its run, not
 * teardown (nothing was freed on a way out; CPython's SIGINT after an
 * uncaught KeyboardInterrupt, raised once finalized, is written "exit"). */
static inline int
snap_killed(const struct snap *s) {
	return !strncmp(s->reason, MT_REASON_KILLED, sizeof MT_REASON_KILLED - 1);
}

struct module {
	char *path;
	char *build_id;        /* hex or NULL */
	uint64_t base, start, end, offset;
};

struct idmap {                 /* open addressing: id -> index (0: empty) */
	int64_t *id;
	uint32_t *ix;
	size_t cap, n;
};

struct stack {
	uint64_t *pcs;
	int n;
	int64_t id;            /* the id the file gave it */
	int64_t py;            /* pystack index; 0: no Python frame; -1: no "py" */
	int dev1;              /* memory on a GPU: its device + 1 (the record's
				* "device"); 0: none */
};

/* Python frames (format 2): a pyframe is (file, qualified name, line); a
 * pystack its frames innermost first, entry[i] set on the outermost frame
 * of each activation of the interpreter loop. */
struct pyframe {
	char *file, *func;
	int line;
};
struct pystack {
	uint32_t *frames;
	uint8_t *entry;
	int n, truncated;
	int64_t elided;            /* frames left out past the depth ... */
	int elided_at;             /* ... between frames[elided_at - 1] and frames[elided_at] */
};

struct segment {
	int kind;
	uint64_t addr;      /* address, or the handle when is_handle */
	uint64_t size;
	uint32_t stack;
	int64_t time_ms;
	int device, stream, mapped, is_handle, sampled;
};

struct event {
	char op[8];         /* alloc, free, oom */
	int kind;
	uint64_t addr, size;
	uint32_t stack;
	int64_t time_ms;
};

/* PyTorch's caching-allocator figures of a device at a snapshot, as of
 * the step it last reported. */
struct devtorch {
	int device;
	int64_t allocated, reserved, active, inactive_split;
	double step;
};

struct oominfo {
	char kind[16], api[64], error[48];
	uint64_t requested;        /* up to 2^64-1: malloc(SIZE_MAX) */
	int64_t device, drv_free, drv_total, cg_current, cg_max, elapsed_ms;
	int sampled;
	/* the outcome line appended later (doc/FORMAT.md): "" when none */
	char outcome[16];          /* recovered, failed_again, raised */
	int64_t out_ms, out_frees, out_freed;
	int by_torch;
	int64_t torch_size, torch_limit, torch_free;
	char torch_snapshot[256];  /* file name beside the dump, "" when none */
};

/* A "kept" record (the Python hook's "why is it still alive" search): the
 * chain of references from a root to a live object of call site stack. */
struct keptstep { char *how, *name, *type, *where; /* where: NULL when absent */ };
struct kept {
	uint32_t stack;            /* index into its file's stacks (0: unknown) */
	double step;               /* NAN when absent */
	int64_t objects, live_bytes, search_ms; /* -1 when absent */
	int final;                 /* from the search at exit */
	struct keptstep *steps;
	size_t nsteps;
};

/* A "searched" record: one search of the Python hook's (or one it
 * skipped), so a row with no "kept" record can say why. */
struct searched {
	double step;               /* NAN when absent */
	int final;                 /* the search at exit */
	char skipped[16];          /* "share", "failed"; "" when it ran */
	char cut[16];              /* "time", "objects"; "" when it ended */
	int64_t objects;           /* objects reached (-1 when absent) */
};

struct mfile {
	char *path;
	int has_sel;               /* FILE@N, FILE@peak, FILE@last named it: */
	long sel;                  /* that snapshot (a seq, SNAP_PEAK, SNAP_LAST) */
	int native;                /* show native frames only (--native) */
	int by_site;               /* rows by call site, not the user's line (--by site) */
	int version;
	int64_t pid, ppid, rank, local_rank, world_size; /* -1 when null */
	char *host, *exe, *argv;   /* argv joined with spaces */
	char *job;                 /* the header's job, or NULL */
	int64_t start_wall_ns, sample_bytes;
	struct module *mods;       /* every module ever listed */
	size_t nmods, cap_mods;
	size_t *modix, modix_cap;  /* open addressing on (start, end): index + 1 */
	/* The modules' indexes by start, for file_module's binary search: nmodord
	 * of them, 0 when two ranges overlap (a library unloaded and another
	 * mapped there), and then file_module scans from the last listed. */
	uint32_t *modord;
	size_t nmodord;
	/* Stacks, pyframes and pystacks in the order their records came,
	 * from index 1 (0: none); every reference in the model is an index.
	 * The maps take the file's ids to indexes (load.c). */
	struct stack *stacks;
	size_t nstacks, cap_stacks;
	char *python;              /* the python record's version, or NULL */
	struct pyframe *pyframes;
	size_t npyframes, cap_pyframes;
	struct pystack *pystacks;
	size_t npystacks, cap_pystacks;
	struct idmap stackmap, pyframemap, pystackmap;
	struct snap *snaps;
	size_t nsnaps, cap_snaps;
	int truncated;             /* read short: the last line or frame cut, or damage */
	int damaged;               /* reading stopped at damage (warned) */
	int summary;               /* read for totals and marks only (run_load_summaries):
				    * no stacks, modules, Python frames nor call-site rows */
	struct oominfo *oom;       /* an OOM dump's oom record, else NULL */
	struct segment *segs;
	size_t nsegs, cap_segs;
	struct event *events;
	size_t nevents, cap_events;
	char *phase_names[MAX_PHASES]; /* the phases the file names */
	int nphase_names;
	struct phasespan *spans;   /* every span the snapshots list, in order */
	size_t nspans, cap_spans;
	struct kept *kept;         /* "kept" records, in file order */
	size_t nkept, cap_kept;
	struct searched *searched; /* "searched" records, in file order */
	size_t nsearched, cap_searched;
	/* Replay state for snap_sites(): the call sites as of snapshot cur_idx. */
	struct site *cur;
	size_t ncur, capcur;
	int64_t *curmap;           /* open addressing: index + 1 */
	size_t mapcap;
	long cur_idx;
};

/* The files a command reads (read/files.c). */
struct run {
	struct mfile *files;       /* run_load: every usable file, in list order */
	size_t nfiles;
	char **list;               /* run_list: the files to read */
	unsigned char *named;      /* ... each named alone (not found in a directory) */
	long *sels;                /* ... each one's FILE@N (path_selector), SNAP_DEFAULT */
	size_t nlist, cap_list, next, nread;
	int optional;
	int native;                /* given to each file read (--native) */
	int by_site;               /* ... and --by site */
};

/* Reading (read/): a file is read up to the first thing wrong in it, and
 * what came before is used.  A file cut short (a last line or zstd frame:
 * a process killed while writing) is normal.  Damage (a record refused,
 * corrupt compressed data, a line over MT_MAX_LINE, a NUL byte) is warned
 * about as "FILE:LINE: reason" (or the byte), and the exit status becomes
 * 1 (read_status).  A file with nothing usable: named alone, exit 1; in a
 * directory, left out with a warning. */
/* The extension of a file the shim writes (".jsonl", or ".jsonl.zst"
 * with MEMTALLY_COMPRESS=1) at the end of name, or NULL. */
const char *jsonl_ext(const char *name);
/* FILE's JSONL (decompressed when it is zstd) to fd; dies on bad input. */
void jsonl_cat(const char *path, int fd);
/* The same up to the end of snapshot seq's line (-1: the whole file): the
 * file as it was when that snapshot was written; exit 1 when it has none. */
void jsonl_cat_upto(const char *path, int fd, long seq);
/* The files of the paths (files, or directories of memtally.*.jsonl with
 * OOM dumps excluded, or with dumps only their *.oom<N>.jsonl); optional:
 * finding none is not an error.  Nothing is read yet. */
void run_list(struct run *r, char **paths, int npaths, int dumps, int optional);
/* The next usable file of the list into f (the caller frees it with
 * mfile_free): 1, or 0 after the last.  One at a time, memory is bounded
 * by the largest file, not by all of them. */
int run_next(struct run *r, struct mfile *f);
/* run_list, and every usable file read into r->files. */
void run_load(struct run *r, char **paths, int npaths);
/* run_load for views that need each snapshot's totals and marks only
 * (ranks, top): every file read as a summary (f->summary: no stacks, no
 * call-site rows; a zstd file's summary frames where it has them,
 * doc/FORMAT.md), a thread per core (MEMTALLY_READERS=N: N threads).
 * Memory: a few hundred bytes a snapshot a file. */
void run_load_summaries(struct run *r, char **paths, int npaths);
/* FILE@N, FILE@peak, FILE@last, FILE@phase:NAME where FILE exists and the
 * whole name does not: returns the snapshot (a seq, SNAP_PEAK, SNAP_LAST,
 * a phase's SNAP_PHASE0 - k) and cuts path at the '@'; SNAP_DEFAULT when
 * the name has none.  run_list does this for every path (mfile.sel). */
long path_selector(char *path);
/* sel made a seq of f where it names a phase (the most live bytes among
 * the snapshots taken during it; exits 1 when there is none), else sel. */
long phase_selector(const struct mfile *f, long sel);
/* The same for OOM dumps: directories contribute their *.oom<N>.jsonl. */
void run_load_dumps(struct run *r, char **paths, int npaths);
void run_load_dumps_if_any(struct run *r, char **paths, int npaths);
void run_free(struct run *r);
/* EXIT_BAD_INPUT once any file read was damaged, else 0. */
int read_status(void);
void mfile_free(struct mfile *f);
/* About half of f's snapshots left out (the first and last kept, older
 * than the last recent_ms first), each one's call-site changes carried
 * into the next, so every snapshot kept reads as before: what bounds a
 * followed file's memory (memtally top). */
void mfile_thin(struct mfile *f, int64_t recent_ms);
void snap_free(struct snap *s);
/* Every call site as of snapshot s of f (deltas replayed), as a fresh
 * array the caller frees. */
struct site *snap_sites(struct mfile *f, const struct snap *s, size_t *n);
/* The same sites, not copied: f's replay state, valid until f's next
 * snap_sites or snap_sites_view (a view that walks many snapshots). */
const struct site *snap_sites_view(struct mfile *f, const struct snap *s, size_t *n);
/* Snapshot seq of f (SNAP_LAST: the last; SNAP_PEAK: file_peak's); exits
 * 1 naming the file when there is none. */
#define SNAP_LAST (-1)
#define SNAP_PEAK (-2)
#define SNAP_DEFAULT (-3) /* none given: the last, or where a command says */
/* FILE@phase:NAME (read/files.c): SNAP_PHASE0 - k for the k-th name given,
 * made a seq once the file is read (the snapshot with the most live bytes
 * of those taken during that phase) */
#define SNAP_PHASE0 (-16)
const struct snap *pick_snapshot(const struct mfile *f, long seq, int kind);
/* A file followed as it grows (memtally top): follow_poll reads what was
 * appended since the last call (at most budget bytes), whole lines into
 * the model, and returns how many lines it took; a line still being
 * written waits.  NULL from follow_open: not a regular file. */
struct follow;
struct follow *follow_open(const char *path);
long follow_poll(struct follow *w, size_t budget);
/* The rest of the file read as a whole file is (top --once): to its end
 * now, nothing left waiting (a last line without its newline is a write
 * cut short; a skippable frame past the end, damage). */
long follow_last(struct follow *w, size_t budget);
struct mfile *follow_file(struct follow *w);
/* Bytes written to the file and not read yet (*size: its size). */
uint64_t follow_pending(struct follow *w, uint64_t *size);
void follow_close(struct follow *w);
/* The call sites --snapshot asks for (a seq, SNAP_LAST, SNAP_PEAK): for
 * the peak, each site's bytes at its kind's high-water mark as the last
 * snapshot records them (live_bytes replaced; live_count 0: not kept;
 * *at_peak set), or, in a file without them, the snapshot with the most
 * live bytes.  *s: the snapshot they come from.  Caller frees. */
struct site *sites_for(struct mfile *f, long seq, int kind, const struct snap **s,
		       int *at_peak, size_t *n);
/* A snapshot's figure for a kind, summed over kinds when kind < 0. */
int64_t snap_live(const struct snap *s, int kind);
/* The snapshot with the most live bytes of kind (kind < 0: heap + mmap). */
const struct snap *file_peak(const struct mfile *f, int kind);
const struct module *file_module(const struct mfile *f, uint64_t pc);
void file_index_modules(struct mfile *f); /* after modules are added (the reader) */
/* "host r3 p1234" or "host p1234" */
const char *file_label(const struct mfile *f, char *buf, size_t n);
/* `{"file":...,"pid":N,"rank":R|null` (the object left open). */
struct sb;
void file_json_head(struct sb *j, const struct mfile *f);
/* "== label  argv" on stdout, cut to 100 columns. */
void file_title(const struct mfile *f);

/* The id the file gave the stack at index ix (0 for none). */
/* The CUDA device a stack's memory is on (its record's "device"), or -1:
 * host memory, pinned host memory, or a file from before the field. */
static inline int
stack_device(const struct mfile *f, uint32_t ix) {
	return ix && ix < f->nstacks ? f->stacks[ix].dev1 - 1 : -1;
}

static inline long long
stack_file_id(const struct mfile *f, uint32_t ix) {
	return ix && ix < f->nstacks ? (long long)f->stacks[ix].id : 0;
}

#endif
