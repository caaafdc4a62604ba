/*
 * format.h — what the file format's writer (the shim) and its reader (the
 * memtally command) must agree on, in one place: the format version and
 * the allocation kinds with their names (doc/FORMAT.md describes them).
 * Plain C, no dependencies: included by both sides.
 */
#ifndef MT_FORMAT_H
#define MT_FORMAT_H
#include <stddef.h>

/* Bump when a record's layout changes (FORMAT.md says what each has). */
#define MT_FORMAT_VERSION 3
/* A zstd file's snapshot summaries: skippable frames of this magic, one
 * after each snapshot's frame (doc/FORMAT.md, "Summaries"). */
#define MT_ZSTD_SUMMARY_MAGIC 0x184D2A5Eu

/* The most native frames a stack holds (MEMTALLY_DEPTH's bound). */
#define MT_MAX_DEPTH 128
/* CUDA devices a file names, 0 .. MT_MAX_DEVICE-1 (a stack's "device"). */
#define MT_MAX_DEVICE 64
/* A stack's frame that stands for frames left out (MEMTALLY_INITDEPTH):
 * no return address is this low. */
#define MT_PC_ELIDED 1
/* A stack's frame that stands for k native frames left out past
 * MEMTALLY_DEPTH, between its innermost and its outermost ones: the value
 * MT_PC_DEEP + k, k 1 .. MT_MAX_DEPTH (no return address is this low). */
#define MT_PC_DEEP 0x100
#define MT_PC_IS_DEEP(pc) ((pc) > MT_PC_DEEP && (pc) <= MT_PC_DEEP + MT_MAX_DEPTH)

/* X(ENUM_SUFFIX, "name"), in the order of the kinds' numbers. */
#define MT_KINDS(X)                                                            \
	X(HEAP, "heap")                                                        \
	X(MMAP, "mmap")                                                        \
	X(MMAP_FILE, "mmap_file")                                              \
	X(CUDA, "cuda")                                                        \
	X(CUDA_HOST, "cuda_host")                                              \
	X(CUDA_MANAGED, "cuda_managed")                                        \
	X(CUDA_VMM, "cuda_vmm")

#define MT_KIND_NAME_(e, n) n,
/* The names as an initializer: {"heap", "mmap", ...}. */
#define MT_KIND_NAMES {MT_KINDS(MT_KIND_NAME_)}

/* Every string in a file is UTF-8: the length of the well-formed UTF-8
 * character at p within avail bytes (1-4), or 0 when there is none (a
 * stray continuation byte, F5-FF, an overlong form, a surrogate, past
 * U+10FFFF, cut short).  For a NUL-terminated string avail may be
 * SIZE_MAX: a NUL fails the continuation test before anything past it is
 * read.  The shim's writer and the command's writers both use it. */
static inline size_t
mt_utf8_len(const unsigned char *p, size_t avail) {
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
		   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (!len || len > avail)
		return 0;
	for (size_t k = 1; k < len; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) || /* overlong, surrogate */
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))     /* overlong, > U+10FFFF */
		return 0;
	return len;
}

/* Record types and field names (doc/FORMAT.md), defined once: the shim
 * builds its lines from these and the reader looks fields up by them, so
 * a name cannot differ between the two.  MT_KEY(k) is k as a JSON
 * member's opening, "\"k\":", for the writer's format strings. */
#define MT_KEY(k) "\"" k "\":"

#define MT_R_HEADER "header"
#define MT_R_MAPS "maps"
#define MT_R_STACK "stack"
#define MT_R_PYTHON "python"
#define MT_R_PYFRAME "pyframe"
#define MT_R_PYSTACK "pystack"
#define MT_R_SNAPSHOT "snapshot"
#define MT_R_OOM "oom"
#define MT_R_SEGMENT "segment"
#define MT_R_TRACE "trace"
#define MT_R_OUTCOME "outcome"
#define MT_R_WARNING "warning"
/* written by the Python hook (_memtally/why.py) through memtally_record */
#define MT_R_KEPT "kept"
#define MT_F_CHAIN "chain"
#define MT_F_HOW "how"
#define MT_F_WHERE "where"
#define MT_F_OBJECTS "objects"
#define MT_F_FINAL "final"
#define MT_F_SEARCH_MS "search_ms"
#define MT_F_MESSAGE "message"
#define MT_R_SEARCHED "searched"
#define MT_F_SKIPPED "skipped"
#define MT_F_CUT "cut"

/* A snapshot's reason that begins so is the final snapshot of a process
 * a signal killed: "signal-term", "signal-int", "signal-hup",
 * "signal-quit", "signal-abrt", "signal-segv", "signal-bus" (the plain
 * "signal" is MEMTALLY_SIGNAL's, an ordinary one). */
#define MT_REASON_KILLED "signal-"

/* every record */
#define MT_F_TYPE "type"
/* header */
#define MT_F_VERSION "version"
#define MT_F_TOOL "tool"
#define MT_F_TOOL_VERSION "tool_version"
#define MT_F_PID "pid"
#define MT_F_PPID "ppid"
#define MT_F_RANK "rank"
#define MT_F_LOCAL_RANK "local_rank"
#define MT_F_WORLD_SIZE "world_size"
#define MT_F_HOST "host"
#define MT_F_JOB "job"
#define MT_F_EXE "exe"
#define MT_F_ARGV "argv"
#define MT_F_START_WALL_NS "start_wall_ns"
#define MT_F_START_MONO_NS "start_mono_ns"
#define MT_F_SAMPLE_BYTES "sample_bytes"
#define MT_F_EXACT_ABOVE_BYTES "exact_above_bytes"
#define MT_F_PAGE_BYTES "page_bytes"
#define MT_F_CONFIG "config"
/* maps */
#define MT_F_MODULES "modules"
#define MT_F_PATH "path"
#define MT_F_BASE "base"
#define MT_F_START "start"
#define MT_F_END "end"
#define MT_F_OFFSET "offset"
#define MT_F_BUILD_ID "build_id"
/* stack, pyframe, pystack, python */
#define MT_F_ID "id"
#define MT_F_PY "py"
#define MT_F_UP "up"
#define MT_F_KEEP "keep"
#define MT_F_PCS "pcs"
#define MT_F_FILE "file"
#define MT_F_FUNC "func"
#define MT_F_LINE "line"
#define MT_F_FRAMES "frames"
#define MT_F_ENTRY "entry"
#define MT_F_TRUNCATED "truncated"
#define MT_F_ELIDED "elided"
#define MT_F_ELIDED_AT "elided_at"
#define MT_F_HEX "hex"
#define MT_F_OFFSETS "offsets"
#define MT_F_DEPTH "depth"
/* snapshot */
#define MT_F_SEQ "seq"
#define MT_F_REASON "reason"
#define MT_F_LABEL "label"
#define MT_F_WALL_NS "wall_ns"
#define MT_F_MONO_NS "mono_ns"
#define MT_F_ELAPSED_MS "elapsed_ms"
#define MT_F_PROC "proc"
#define MT_F_RSS_BYTES "rss_bytes"
#define MT_F_VMS_BYTES "vms_bytes"
#define MT_F_PSS_BYTES "pss_bytes"
#define MT_F_CGROUP "cgroup"
#define MT_F_CURRENT_BYTES "current_bytes"
#define MT_F_MAX_BYTES "max_bytes"
#define MT_F_ALLOCATOR "allocator"
#define MT_F_NAME "name"
#define MT_F_OMITTED "omitted"
#define MT_F_ARENA_BYTES "arena_bytes"
#define MT_F_HBLKHD_BYTES "hblkhd_bytes"
#define MT_F_RESIDENT_BYTES "resident_bytes"
#define MT_F_DEVICES "devices"
#define MT_F_MMAP_RESERVED_BYTES "mmap_reserved_bytes"
#define MT_F_MARKS "marks"
/* phases and the step's workload (state/phases.c) */
#define MT_F_PHASE "phase"
#define MT_F_PHASES "phases"
#define MT_F_COUNT "count"
#define MT_F_MS "ms"
#define MT_F_SPANS "spans"
#define MT_F_WORKLOAD "workload"
#define MT_F_PEAK_PHASE "peak_phase"
#define MT_F_SHIM "shim"
#define MT_F_MEMORY_BYTES "memory_bytes"
#define MT_F_DROPPED_STACKS "dropped_stacks"
#define MT_F_DROPPED_LIVE "dropped_live"
#define MT_F_COALESCED "coalesced"
#define MT_F_SITES_READ "sites_read"
#define MT_F_CALLSITES_MODE "callsites_mode"
#define MT_F_CALLSITES "callsites"
#define MT_MODE_FULL "full"
#define MT_MODE_DELTA "delta"
#define MT_MODE_TOP "top"
/* a call site's row, and a kind's totals */
#define MT_F_STACK "stack"
#define MT_F_KIND "kind"
#define MT_F_LIVE_BYTES "live_bytes"
#define MT_F_LIVE_COUNT "live_count"
#define MT_F_ALLOCS "allocs"
#define MT_F_ALLOC_BYTES "alloc_bytes"
#define MT_F_ASKED_BYTES "asked_bytes"
#define MT_F_FREES "frees"
#define MT_F_FREE_BYTES "free_bytes"
#define MT_F_PEAK_BYTES "peak_bytes"
#define MT_F_AT_PEAK_BYTES "at_peak_bytes"
#define MT_F_PEAK_MS "peak_ms"
#define MT_F_PEAK_STEP "peak_step"
/* outcome records and devices[].torch (PyTorch) */
#define MT_F_OUTCOME "outcome"
#define MT_F_RAISED "raised"
#define MT_F_FREED_BYTES "freed_bytes"
#define MT_F_BY "by"
#define MT_F_TORCH_SIZE "torch_size"
#define MT_F_TORCH_LIMIT_BYTES "torch_limit_bytes"
#define MT_F_TORCH_FREE_BYTES "torch_free_bytes"
#define MT_F_TORCH_SNAPSHOT "torch_snapshot"
#define MT_F_TORCH "torch"
#define MT_F_ALLOCATED_BYTES "allocated_bytes"
#define MT_F_RESERVED_BYTES "reserved_bytes"
#define MT_F_ACTIVE_BYTES "active_bytes"
#define MT_F_INACTIVE_SPLIT_BYTES "inactive_split_bytes"
#define MT_F_STEP "step"
#define MT_F_LIVE_ESTIMATED "live_estimated"
/* oom, segment, trace */
#define MT_F_API "api"
#define MT_F_ERROR "error"
#define MT_F_REQUESTED_BYTES "requested_bytes"
#define MT_F_SAMPLED "sampled"
#define MT_F_DEVICE "device"
#define MT_F_DRIVER_FREE_BYTES "driver_free_bytes"
#define MT_F_DRIVER_TOTAL_BYTES "driver_total_bytes"
#define MT_F_CGROUP_CURRENT_BYTES "cgroup_current_bytes"
#define MT_F_CGROUP_MAX_BYTES "cgroup_max_bytes"
#define MT_F_ADDRESS "address"
#define MT_F_HANDLE "handle"
#define MT_F_SIZE "size"
#define MT_F_TIME_MS "time_ms"
#define MT_F_STREAM "stream"
#define MT_F_MAPPED "mapped"
#define MT_F_OP "op"
/* fields the shim writes that the reader does not read */
#define MT_F_ACTIVE_BYTES "active_bytes"
#define MT_F_ALLOCATED_BYTES "allocated_bytes"
#define MT_F_ANON_BYTES "anon_bytes"
#define MT_F_DRIVER_INFO_AGE_MS "driver_info_age_ms"
#define MT_F_DROPPED_PYSTACKS "dropped_pystacks"
#define MT_F_DROPPED_SNAPSHOTS "dropped_snapshots"
#define MT_F_EVENTS "events"
#define MT_F_FDS "fds"
#define MT_F_FILE_BYTES "file_bytes"
#define MT_F_FORDBLKS_BYTES "fordblks_bytes"
#define MT_F_HWM_BYTES "hwm_bytes"
#define MT_F_KEEPCOST_BYTES "keepcost_bytes"
#define MT_F_KERNEL_STACK_BYTES "kernel_stack_bytes"
#define MT_F_LAST_WRITE_NS "last_write_ns"
#define MT_F_LIVE "live"
#define MT_F_LIVE_ENTRIES "live_entries"
#define MT_F_LIVE_MAPS "live_maps"
#define MT_F_MAPPED_BYTES "mapped_bytes"
#define MT_F_MAPPED_FILE_BYTES "mapped_file_bytes"
#define MT_F_MAX "max"
#define MT_F_MEMORY "memory"
#define MT_F_METADATA_BYTES "metadata_bytes"
#define MT_F_OOM "oom"
#define MT_F_OOM_DUMPS "oom_dumps"
#define MT_F_OOM_KILL "oom_kill"
#define MT_F_OOM_RECOVERED "oom_recovered"
#define MT_F_OOMS "ooms"
#define MT_F_ORDBLKS "ordblks"
#define MT_F_PSS_ANON_BYTES "pss_anon_bytes"
#define MT_F_PSS_FILE_BYTES "pss_file_bytes"
#define MT_F_PSS_SHMEM_BYTES "pss_shmem_bytes"
#define MT_F_PYCODE_RETIRED "pycode_retired"
#define MT_F_PYFRAMES "pyframes"
#define MT_F_PYSTACKS "pystacks"
#define MT_F_PYTHON "python"
#define MT_F_RECOVERED "recovered"
#define MT_F_RETAINED_BYTES "retained_bytes"
#define MT_F_SHARED_BYTES "shared_bytes"
#define MT_F_SHMEM_BYTES "shmem_bytes"
#define MT_F_SITES "sites"
#define MT_F_SLAB_BYTES "slab_bytes"
#define MT_F_SOCK_BYTES "sock_bytes"
#define MT_F_SOLO "solo"
#define MT_F_STACKS "stacks"
#define MT_F_SWAP_BYTES "swap_bytes"
#define MT_F_THREADS "threads"
#define MT_F_UNWIND_FALLBACKS "unwind_fallbacks"
#define MT_F_UORDBLKS_BYTES "uordblks_bytes"
#define MT_F_USS_BYTES "uss_bytes"
#define MT_F_WRITER "writer"

/* The longest line a reader takes: a full snapshot of the default
 * MEMTALLY_MAX_STACKS (1 Mi stacks) is about 150 MiB.  A longer "line" is
 * not a memtally record (a decompression bomb, a file of zeros). */
#define MT_MAX_LINE (256u << 20)

#endif
