/*
 * config.h — the option table: every MEMTALLY_* variable, parsed once from
 * environ in the constructor; nothing else in the shim reads the
 * environment.  Never allocates.  May run inside malloc, before main.
 */
#ifndef MT_CONFIG_H
#define MT_CONFIG_H
#include <stddef.h>
#include <stdint.h>

/* X(field, NAME, type, default, min, max, doc).  Types: PATH, U64 (count),
 * SIZE (bytes, K/M/G/T suffixes), SECS (fractional seconds), SIG, BOOL,
 * FRAC (0..1), UNWIND, ROUTES.  min and max bound a numeric option, written
 * as a value of it is ("" for the other types); a value outside them warns
 * and keeps the default, as a value that does not parse does.  README.md's
 * table is generated from this list: `build/memtally-config --markdown`
 * prints it, and test_config fails when the README's differs. */
#define MT_OPTIONS(X)                                                          \
	X(out, OUT, PATH, "./memtally-out", "", "", "output directory (created)") \
	X(every, EVERY, U64, "0", "0", "1099511627776", "snapshot every N tracked allocations, written by the allocating thread at the N-th (0 = off)") \
	X(cadence, CADENCE, BOOL, "1", "", "", "snapshots that serve any run length, with no other option: at each of the first 64 \"step\" marks, then every 2nd step for 64 more, every 4th, and so on; without steps the same on time (from every 20 ms, never more than 5% of the time spent writing, in the writing thread's CPU time); under 2,000 snapshots a process for any run. MEMTALLY_STEPS or MEMTALLY_INTERVAL set replaces its part (0: only the triggers set)") \
	X(interval, INTERVAL, SECS, "0", "0", "86400", "snapshot every T seconds (0 = off: the cadence's own, MEMTALLY_CADENCE; fractions allowed)") \
	X(steps, STEPS, U64, "0", "0", "1099511627776", "snapshot each time the \"step\" mark reaches a multiple of N (memtally_mark; under `memtally run` PyTorch's optimizer steps are marked without code), written by the marking thread, of the state at the mark (0 = off: the cadence's own, MEMTALLY_CADENCE)") \
	X(rise, RISE, FRAC, "0.25", "0", "1", "snapshot when live host (heap + mmap) or device bytes rise this fraction, and 4 MiB, above the lowest since the last snapshot; checked every 100 ms (0 = off)") \
	X(signal, SIGNAL, SIG, "USR1", "", "", "signal that requests a snapshot: USR1, USR2, RTMIN+n or RTMAX-n (or their numbers: 10, 12, 34-64), or none") \
	X(sample, SAMPLE, SIZE, "0", "0", "1T", "mean bytes between heap samples (0 = exact); K/M/G suffixes") \
	X(exact_above, EXACT_ABOVE, SIZE, "1M", "0", "1T", "heap allocations of this size or more are always exact") \
	X(depth, DEPTH, U64, "32", "1", "128", "native frames kept per stack; past it both ends (the innermost three quarters, a mark, the outermost quarter) when the stack ends within 128 frames") \
	X(python, PYTHON, BOOL, "1", "", "", "record the Python stack of each tracked allocation in CPython 3.10-3.13 processes (0: native stacks only)") \
	X(pydepth, PYDEPTH, U64, "64", "1", "64", "Python frames kept per stack; past it both ends") \
	X(initdepth, INITDEPTH, U64, "4", "0", "128", "inside a library initializer the dynamic loader runs (constructors at start and dlopen, destructors at exit): the innermost native frames kept, then a mark for those left out, the initializer's call and the loader's frames (0: keep them all)") \
	X(pynative, PYNATIVE, BOOL, "0", "", "", "under Python, keep the native frames outside the interpreter's innermost eval loop too (0: the Python stack stands for them)") \
	X(unwind, UNWIND, UNWIND, "cfi", "", "", "stack walker: cfi (the shim's own, from each object's unwind tables; a stack it cannot follow goes to libunwind), libunwind, or fp (frame pointers)") \
	X(compress, COMPRESS, BOOL, "1", "", "", "write the file zstd-compressed, a frame per snapshot (.jsonl.zst: memtally reads it; `memtally cat` or `zstd -dc` gives JSONL); 0: plain .jsonl") \
	X(top, TOP, U64, "0", "0", "16777216", "call sites per snapshot, largest live first (0 = all)") \
	X(trace, TRACE, U64, "100000", "16", "16777216", "events kept in the ring that OOM dumps carry (mmaps, large heap blocks, failures)") \
	X(oom_dumps, OOM_DUMPS, U64, "3", "0", "1000", "max OOM and pre-OOM dumps per process") \
	X(oom_render, OOM_RENDER, BOOL, "0", "", "", "after each OOM dump, also write its pickle, HTML page and flame graph beside it (from the writer thread, or at exit)") \
	X(torch_history, TORCH_HISTORY, U64, "100000", "0", "100000000", "PyTorch >= 2.0: entries of its memory history (Python stacks), for its snapshot beside a CUDA OOM dump (read by scripts/python/_memtally/cuda.py; 0: history off, doc/cuda.md)") \
	X(cuda, CUDA, BOOL, "1", "", "", "track CUDA driver allocations (device, pinned host, managed, VMM)") \
	X(cuda_routes, CUDA_ROUTES, ROUTES, "all", "", "", "debug: the routes to the driver that are wrapped (direct,dlsym,gpa,self or all)") \
	X(host, HOST, BOOL, "1", "", "", "track heap and mmap (0: pass every call straight through)") \
	X(smaps, SMAPS, BOOL, "1", "", "", "read /proc/self/smaps_rollup (pss, uss, shared) in snapshots (in step, interval, every and rise snapshots at most once a second)") \
	X(cgroup, CGROUP, BOOL, "1", "", "", "read the process's cgroup memory figures (v2, or v1's memory controller) in snapshots") \
	X(preoom, PREOOM, FRAC, "0.95", "0", "1", "dump when cgroup usage reaches this fraction of its limit, checked every 100 ms (0 = off)") \
	X(death_wait, DEATH_WAIT, SECS, "10", "0.05", "3600", "a death by signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS): the longest its final snapshot may take; past it the process dies of its signal without it, whatever the snapshot was waiting for") \
	X(follow, FOLLOW, BOOL, "1", "", "", "children are tracked too (0: fork children write nothing, exec'd children run without the shim)") \
	X(verbose, VERBOSE, BOOL, "0", "", "", "print the effective configuration and output path to stderr") \
	X(disk_floor, DISK_FLOOR, SIZE, "256M", "0", "1T", "snapshots are not written while the output filesystem's free space is below the larger of this and 5% of its size (said once, as a warning; writing resumes when space returns; 0 = no floor)") \
	X(quiet, QUIET, BOOL, "0", "", "", "no warning on the program's stderr (each goes into the file as a warning record either way; without it, the first of a process is also printed there, one line; `memtally run` sets it and prints each distinct warning once at the end)") \
	X(seed, SEED, U64, "0", "0", "18446744073709551615", "sampling random seed (0 = from time and thread id; set it for repeatable runs)") \
	X(max_stacks, MAX_STACKS, U64, "1048576", "16", "1073741824", "distinct stacks kept; further new stacks are counted as dropped") \
	X(prometheus, PROMETHEUS, PATH, "", "", "", "a directory for node_exporter's textfile collector: each process keeps memtally_<host>_<pid>.prom there (Prometheus exposition format, written to a temporary name and renamed), at the snapshots at most every MEMTALLY_PROMETHEUS_INTERVAL and at exit (README: metrics, labels, what a dead process leaves); empty = off") \
	X(prometheus_interval, PROMETHEUS_INTERVAL, SECS, "5", "0", "86400", "the shortest time between two writes of the .prom file (the exit's and a death's are always written)") \
	X(prometheus_top, PROMETHEUS_TOP, U64, "5", "0", "10", "the .prom file's memtally_line_live_bytes series: the call sites with the most live bytes (at most 10: the bound on series a process)") \
	X(max_live, MAX_LIVE, U64, "67108864", "64", "68719476736", "tracked live allocations kept (about this many; up to twice when the blocks lie in several 64 MiB regions, as the pointer table checks the whole count when it grows); further ones are counted as dropped")

/* MEMTALLY_* names that are not the shim's options but are read by
 * memtally's other parts (no warning for them): the Python start-up hook,
 * `memtally run`, and the test and build scripts. */
#define MT_KNOWN_NAMES(X)                                                      \
	X(TORCH, "the Python start-up hook: 0 turns it off")                  \
	X(LIB, "memtally run: the shim to preload")                           \
	X(RUN_JOB, "memtally run: set for what it runs (a run inside shares its lock)") \
	X(TEST, "test/run.sh: the tests to run")                               \
	X(CASE, "test/run.sh: the case to run")                                \
	X(TEST_PREFIX, "test/run.sh: a wrapper for C tests")                   \
	X(TEST_TIMEOUT, "test/run.sh: the watchdog")                           \
	X(GOLDEN_UPDATE, "test_golden: rewrite the golden files")              \
	X(DEPS_EXTRA, "scripts/setup-deps.sh: more packages")                  \
	X(TOP_BENCH, "test/bench: the top benchmark")                          \
	X(JOB, "the job label of MEMTALLY_PROMETHEUS's metrics (else the launcher's job id)")

enum mt_opt_type { MT_PATH, MT_U64, MT_SIZE, MT_SECS, MT_SIG, MT_BOOL,
		   MT_FRAC, MT_UNWIND, MT_ROUTES };

struct mt_config {
	char out[1024];      /* absolute output directory */
	uint64_t every;      /* tracked allocations between snapshots */
	int cadence;         /* bool: the doubling cadence on steps and time */
	double interval;     /* seconds between snapshots, 0 = off */
	uint64_t steps;      /* "step" marks between snapshots, 0 = off */
	double rise;         /* fraction above the last snapshot's live bytes */
	int signal;          /* signal number, 0 = none */
	uint64_t sample;     /* mean bytes between samples, 0 = exact */
	uint64_t exact_above; /* bytes */
	uint64_t depth;      /* frames */
	int python;          /* bool */
	uint64_t pydepth;    /* frames */
	uint64_t initdepth;  /* frames, 0 = all */
	int pynative;        /* bool */
	int unwind;          /* MT_UNWIND_*: 0 libunwind, 1 fp, 2 cfi */
	int compress;        /* bool */
	uint64_t top;        /* call sites, 0 = all */
	uint64_t trace;      /* events */
	uint64_t oom_dumps;  /* dumps */
	int oom_render;      /* bool */
	uint64_t torch_history; /* entries (read by _memtally/cuda.py, not the shim) */
	int cuda;            /* bool */
	uint64_t cuda_routes; /* bits: 1 direct, 2 dlsym, 4 gpa, 8 self */
	int host;            /* bool */
	int smaps;           /* bool */
	int cgroup;          /* bool */
	double preoom;       /* fraction */
	double death_wait;   /* seconds a death's final snapshot may take */
	int follow;          /* bool */
	int verbose;         /* bool */
	int quiet;           /* bool */
	uint64_t disk_floor; /* bytes, 0 = none */
	uint64_t seed;       /* sampling seed, 0 = random */
	uint64_t max_stacks; /* stacks */
	uint64_t max_live;   /* pointer-table entries */
	char prometheus[1024]; /* textfile-collector directory, "" = off */
	double prometheus_interval; /* seconds between .prom writes */
	uint64_t prometheus_top; /* memtally_line_live_bytes series */
	/* Not options: the launcher's rank variables, read from the same
	 * environment (-1 when unset). */
	long rank;           /* RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID */
	long local_rank;     /* LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID */
	long world_size;     /* WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS */
	int valgrind;        /* LD_PRELOAD holds valgrind's vgpreload: its clone takes
			      * threads and forks only (platform/fdio.h) */
	/* The job's name for MEMTALLY_PROMETHEUS's labels: MEMTALLY_JOB,
	 * SLURM_JOB_ID, TORCHELASTIC_RUN_ID, OMPI_MCA_ess_base_jobid,
	 * PMIX_NAMESPACE, in that order ("" when none is set; cut at 127). */
	char job[128];
};

extern struct mt_config mt_cfg;

/* Parse envp into mt_cfg; print one warning per bad value and keep the
 * default.  Never allocates. */
void mt_config_init(char **envp);
/* Append the effective configuration as a JSON object.  Never allocates. */
struct mt_buf;
void mt_config_json(struct mt_buf *b);
/* Print the table as Markdown to fd (README generation).  Never allocates. */
void mt_config_markdown(int fd);
/* Whether MEMTALLY_<name>=value would be taken (memtally run checks --set
 * with it): 0, or -1 with the reason in why (an unknown name, a value that
 * does not parse or is out of range).  Leaves mt_cfg as it was. */
int mt_config_check(const char *name, const char *value, char *why, size_t n);

#endif
