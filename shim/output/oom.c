/*
 * oom.c — host, CUDA and pre-OOM dumps (oom.h); the ring they carry is
 * events.c.
 *
 * A dump file holds, in order: header, maps, every stack, an `oom` record
 * (what failed), one `segment` line per live tracked allocation of the
 * failing kind (heap blocks from the pointer table, mappings from the map
 * table), the `trace` lines of the ring (oldest first), and a complete
 * snapshot with reason "oom" or "preoom".  It is streamed through a buffer
 * reserved at start (mt_buf_stream), so any number of segments fit.
 *
 * A CUDA dump's outcome is known only later, and is appended to it then as
 * an `outcome` line: `recovered` (the device's next allocation succeeded:
 * PyTorch's caching allocator freed its cache and retried), `failed_again`
 * (the next one failed too: its retry, dumped in the next file) or
 * `raised` (PyTorch's OOM observer reported OutOfMemoryError: the failure
 * the program saw).  Each device keeps the path of its last CUDA dump
 * until then (the file is reopened by name, O_APPEND|O_NOFOLLOW, and
 * written only if it is still the file the dump made).
 */
#include "platform/glue.h"
#include "output/file.h"
#include "output/oom.h"
#include <errno.h>
#include "platform/buf.h"
#include "platform/config.h"
#include "state/maptab.h"
#include "output/procstat.h"
#include "state/ptrtab.h"
#include "state/events.h"
#include "state/trigger.h"
#include "capture/charge.h"
#include "state/sites.h"
#include "output/snapshot.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "state/devices.h"

static mt_lock_t dump_lock;
static uint64_t skipped;
static char *dump_mem;          /* streaming buffer */
static char *dump_scratch;      /* /proc reads */
#define DUMP_BUF (64u << 10) /* streamed: written out each time it fills */
#define DUMP_SCRATCH (64u << 10)
static int preoom_armed = 1;
/* Dumps for MEMTALLY_OOM_RENDER: slots filled once each, in order, under
 * dump_lock; render_n counts those filled (never reset: a renderer that
 * reset it lost a dump queued while it was rendering), render_done those
 * rendered (the renderer's own, under render_lock). */
static char render_paths[8][1300];
static unsigned render_n, render_done;
/* Each device's last CUDA dump whose outcome is not known yet (under
 * pend_lock, taken alone or inside dump_lock, never the other way; a
 * blocking lock: held for one short append, never across a call out): its path, its file's identity, and the device's frees when
 * it was written (the frees until its outcome are the cache released). */
static struct pending {
	char path[1300];
	uint64_t st_dev, st_ino;
	uint64_t frees, free_bytes;
	int set;
} pend[MT_MAXDEV];
static char outcome_line[2048];
static mt_lock_t pend_lock;

int
mt_oom_init(void) {
	if (mt_events_init(mt_cfg.trace))
		return ENOMEM;
	dump_mem = mt_sys_mmap(DUMP_BUF + DUMP_SCRATCH);
	if (!dump_mem)
		return ENOMEM;
	dump_scratch = dump_mem + DUMP_BUF;
	return 0;
}

struct dump_ctx {
	const char *kind;        /* "host", "cuda" or "preoom" */
	const char *error;       /* NULL: the kind's own */
	int device;              /* cuda */
	uint64_t drv_free, drv_total;
	struct mt_buf *b;
	const char *api;
	uint64_t requested;
	uint64_t cg_current, cg_max;
	int have_cg;
	uint64_t nseg;
};

static int
is_device_kind(int k) {
	return k >= MT_CUDA;
}

/* A host dump lists host blocks; a CUDA dump the device allocations, VMM
 * handles and mappings. */
static void
seg_ptr(const struct mt_ptr *e, void *arg) {
	struct dump_ctx *c = arg;
	struct mt_buf *b = c->b;
	int cuda = !strcmp(c->kind, "cuda");
	if (is_device_kind(e->kind) != cuda)
		return;
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_SEGMENT "\"," MT_KEY(MT_F_KIND) "\"%s\",\"%s\":\"",
		      mt_kind_names[e->kind], e->flags & MT_PTR_HANDLE ? MT_F_HANDLE : MT_F_ADDRESS);
	mt_buf_hex(b, e->addr & ~MT_TAG_MASK);
	mt_buf_printf(b, "\"," MT_KEY(MT_F_SIZE) "%lu," MT_KEY(MT_F_STACK) "%u," MT_KEY(MT_F_TIME_MS) "%u%s",
		      (unsigned long)e->size, mt_stack_public(e->stack), e->time_ms,
		      e->sampled ? "," MT_KEY(MT_F_SAMPLED) "true" : "");
	if (cuda)
		mt_buf_printf(b, "," MT_KEY(MT_F_DEVICE) "%u," MT_KEY(MT_F_STREAM) "%u%s", e->device, e->stream,
			      e->flags & MT_PTR_MAPPED ? "," MT_KEY(MT_F_MAPPED) "true" : "");
	mt_buf_puts(b, "}\n");
}

static void
seg_map(const struct mt_map *m, void *arg) {
	struct dump_ctx *c = arg;
	struct mt_buf *b = c->b;
	if (!strcmp(c->kind, "cuda") || m->reserved) /* a reservation holds no memory */
		return;
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_SEGMENT "\"," MT_KEY(MT_F_KIND) "\"%s\"," MT_KEY(MT_F_ADDRESS) "\"",
		      mt_kind_names[m->kind]);
	mt_buf_hex(b, m->start);
	mt_buf_printf(b, "\"," MT_KEY(MT_F_SIZE) "%lu," MT_KEY(MT_F_STACK) "%u," MT_KEY(MT_F_TIME_MS) "%u}\n",
		      (unsigned long)(m->end - m->start), mt_stack_public(m->stack), m->time_ms);
}

static void
trace_line(const struct mt_ev *e, void *arg) {
	struct mt_buf *b = arg;
	static const char *const ops[] = {"?", "alloc", "free", "oom"};
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_TRACE "\"," MT_KEY(MT_F_OP) "\"%s\"," MT_KEY(MT_F_KIND) "\"%s\"," MT_KEY(MT_F_ADDRESS) "\"",
		      ops[e->op & 3], mt_kind_names[e->kind % MT_NKINDS]);
	mt_buf_hex(b, e->addr);
	mt_buf_printf(b, "\"," MT_KEY(MT_F_SIZE) "%lu," MT_KEY(MT_F_STACK) "%u," MT_KEY(MT_F_TIME_MS) "%lu}\n",
		      (unsigned long)e->size, mt_stack_public(e->stack),
		      (unsigned long)(e->time_ns > mt_start_mono_ns
					      ? (e->time_ns - mt_start_mono_ns) / 1000000u
					      : 0));
}

static void
trace(struct mt_buf *b) {
	mt_events_each(trace_line, b);
}

static void
body(struct mt_buf *b, void *arg) {
	struct dump_ctx *c = arg;
	mt_buf_printf(b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_OOM "\"," MT_KEY(MT_F_KIND) "\"%s\"," MT_KEY(MT_F_API) "\"%s\","
			 MT_KEY(MT_F_REQUESTED_BYTES) "%lu," MT_KEY(MT_F_ERROR) "\"%s\"," MT_KEY(MT_F_SAMPLED) "%s",
		      c->kind, c->api, (unsigned long)c->requested,
		      c->error                     ? c->error
		      : !strcmp(c->kind, "preoom") ? "cgroup_threshold"
		      : !strcmp(c->kind, "cuda")   ? "CUDA_ERROR_OUT_OF_MEMORY"
						   : "ENOMEM",
		      mt_cfg.sample ? "true" : "false");
	if (c->have_cg)
		mt_buf_printf(b, "," MT_KEY(MT_F_CGROUP_CURRENT_BYTES) "%lu," MT_KEY(MT_F_CGROUP_MAX_BYTES) "%lu",
			      (unsigned long)c->cg_current, (unsigned long)c->cg_max);
	if (!strcmp(c->kind, "cuda")) {
		mt_buf_printf(b, "," MT_KEY(MT_F_DEVICE) "%d", c->device);
		if (c->drv_total)
			mt_buf_printf(b, "," MT_KEY(MT_F_DRIVER_FREE_BYTES) "%lu," MT_KEY(MT_F_DRIVER_TOTAL_BYTES) "%lu",
				      (unsigned long)c->drv_free, (unsigned long)c->drv_total);
	}
	mt_buf_printf(b, "," MT_KEY(MT_F_ELAPSED_MS) "%lu}\n", (unsigned long)mt_ms_since_start());
	c->b = b;
	mt_ptrtab_each(seg_ptr, c);
	mt_maptab_each(seg_map, c);
	trace(b);
}

static int
dump(struct dump_ctx *c, const char *reason) {
	if (!mt_trylock(&dump_lock)) {
		mt_add(&skipped, 1);
		return 0;
	}
	int wrote = 0;
	uint64_t ndumps = mt_dump_count();
	if (ndumps < mt_cfg.oom_dumps) {
		char path[1300];
		path[0] = 0;
		long fd = mt_file_dump_open((unsigned)ndumps + 1, path, sizeof path);
		if (fd >= 0) {
			struct mt_buf b;
			mt_buf_stream(&b, dump_mem, DUMP_BUF, (int)fd);
			int err = mt_snapshot_dump((int)fd, &b, reason, body, c, dump_scratch,
						   DUMP_SCRATCH);
			if (!strcmp(c->kind, "cuda") && c->device >= 0 && c->device < MT_MAXDEV) {
				struct pending *q = &pend[c->device];
				struct stat st;
				if (!mt_sys(SYS_fstat, fd, &st, 0, 0, 0, 0)) {
					mt_lock(&pend_lock);
					memcpy(q->path, path, sizeof q->path);
					q->st_dev = st.st_dev, q->st_ino = st.st_ino;
					q->frees = mt_devs[c->device].frees;
					q->free_bytes = mt_devs[c->device].free_bytes;
					q->set = 1;
					mt_unlock(&pend_lock);
				}
			}
			mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
			mt_dump_counted();
			if (err)
				mt_warn("OOM dump %s incomplete (errno %d)", path, err);
			wrote = 1;
			if (mt_cfg.oom_render && render_n < 8) { /* the writer renders it */
				memcpy(render_paths[render_n], path, sizeof path);
				__atomic_store_n(&render_n, render_n + 1, __ATOMIC_RELEASE);
				mt_trigger(MT_REASON_RENDER);
			}
		} else {
			mt_warn("cannot write OOM dump %s (errno %ld)", path, -fd);
			mt_dump_counted();
		}
	}
	mt_unlock(&dump_lock);
	return wrote;
}

/* Out of line and cold: inline, its registers were saved and restored on
 * every hook's way in and out. */
__attribute__((noinline, cold)) void
mt_oom_host_failed(const char *api, uint64_t requested) {
	int e = errno;
	if (e == ENOMEM)
		mt_oom_host(api, requested);
	errno = e;
}

void
mt_oom_host(const char *api, uint64_t requested) {
	/* the failing call's own stack: the event names where it was made */
	mt_event(MT_EV_OOM, MT_HEAP, 0, requested, mt_capture(MT_HEAP));
	struct dump_ctx c = {.kind = "host", .api = api, .requested = requested};
	c.have_cg = !mt_cgroup_usage(&c.cg_current, &c.cg_max, dump_scratch, DUMP_SCRATCH);
	dump(&c, "oom");
}

/* Append the outcome of device d's pending dump (pend_lock held) and
 * forget it; torch: PyTorch's observer arguments (raised), or NULL.  The
 * dump's path without ".jsonl" goes to stem (when given). */
static int
settle_locked(int d, const char *outcome, const uint64_t *torch, char *stem, size_t n) {
	struct pending *q = &pend[d];
	if (!q->set)
		return 0;
	q->set = 0;
	struct mt_dev *v = &mt_devs[d];
	struct mt_buf b;
	mt_buf_fixed(&b, outcome_line, sizeof outcome_line - 1);
	mt_buf_printf(&b, "{" MT_KEY(MT_F_TYPE) "\"" MT_R_OUTCOME "\"," MT_KEY(MT_F_OUTCOME) "\"%s\","
			  MT_KEY(MT_F_DEVICE) "%d," MT_KEY(MT_F_TIME_MS) "%lu," MT_KEY(MT_F_FREES) "%lu,"
			  MT_KEY(MT_F_FREED_BYTES) "%lu",
		      outcome, d, (unsigned long)mt_ms_since_start(),
		      (unsigned long)(v->frees - q->frees),
		      (unsigned long)(v->free_bytes - q->free_bytes));
	size_t plen = strlen(q->path);
	if (plen > 6 && !strcmp(q->path + plen - 6, ".jsonl"))
		plen -= 6;
	if (torch) {
		const char *base = q->path;
		for (const char *p = q->path; p < q->path + plen; p++)
			if (*p == '/')
				base = p + 1;
		mt_buf_printf(&b, "," MT_KEY(MT_F_BY) "\"torch\"," MT_KEY(MT_F_TORCH_SIZE) "%lu,"
				  MT_KEY(MT_F_TORCH_LIMIT_BYTES) "%lu," MT_KEY(MT_F_TORCH_FREE_BYTES) "%lu,"
				  MT_KEY(MT_F_TORCH_SNAPSHOT),
			      (unsigned long)torch[0], (unsigned long)torch[1], (unsigned long)torch[2]);
		char name[1300];
		size_t bl = (size_t)(q->path + plen - base);
		memcpy(name, base, bl);
		memcpy(name + bl, ".torch.jsonl", 13);
		mt_buf_jstr(&b, name);
	}
	mt_buf_puts(&b, "}\n");
	if (stem && n) {
		size_t k = plen < n - 1 ? plen : n - 1;
		memcpy(stem, q->path, k);
		stem[k] = 0;
	}
	long fd = mt_sys(SYS_open, q->path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0, 0, 0, 0);
	if (fd < 0)
		return 1;
	struct stat st;
	if (!mt_sys(SYS_fstat, fd, &st, 0, 0, 0, 0) && st.st_dev == q->st_dev &&
	    st.st_ino == q->st_ino && !b.overflow)
		mt_sys(SYS_write, fd, outcome_line, b.len, 0, 0, 0);
	mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
	return 1;
}

void
mt_oom_cuda(const char *api, uint64_t requested, int device, uint64_t drv_free,
	    uint64_t drv_total, int retry) {
	if (device >= 0 && device < MT_MAXDEV) { /* the last failure is no longer the last */
		mt_lock(&pend_lock);
		if (retry)
			settle_locked(device, "failed_again", NULL, NULL, 0);
		pend[device].set = 0;
		mt_unlock(&pend_lock);
	}
	struct dump_ctx c = {.kind = "cuda", .api = api, .requested = requested,
			     .device = device, .drv_free = drv_free, .drv_total = drv_total};
	dump(&c, "oom");
}

void
mt_oom_cuda_recovered(int device) {
	if (device < 0 || device >= MT_MAXDEV)
		return;
	mt_lock(&pend_lock);
	settle_locked(device, "recovered", NULL, NULL, 0);
	mt_unlock(&pend_lock);
}

int
mt_oom_torch(int device, uint64_t size, uint64_t limit, uint64_t drv_free, char *stem, size_t n) {
	if (stem && n)
		stem[0] = 0;
	if (device < 0 || device >= MT_MAXDEV)
		return 1;
	const uint64_t torch[3] = {size, limit, drv_free};
	int was_pending = mt_dev_raised(device);
	mt_lock(&pend_lock);
	int r = settle_locked(device, "raised", torch, stem, n);
	mt_unlock(&pend_lock);
	if (r || was_pending)
		return r ? 0 : 1; /* a driver failure's dump, or none (MEMTALLY_OOM_DUMPS) */
	/* no driver failure: PyTorch's own limit (its memory fraction) */
	mt_event(MT_EV_OOM, MT_CUDA, 0, size, 0);
	struct dump_ctx c = {.kind = "cuda", .api = "torch", .error = "torch_limit",
			     .requested = size, .device = device, .drv_free = drv_free,
			     .drv_total = limit};
	if (!dump(&c, "oom"))
		return 1;
	mt_lock(&pend_lock);
	r = settle_locked(device, "raised", torch, stem, n);
	mt_unlock(&pend_lock);
	return r ? 0 : 1;
}

int
mt_preoom_check(void) {
	uint64_t cur, max;
	if (mt_cfg.preoom <= 0 || mt_cgroup_usage(&cur, &max, dump_scratch, DUMP_SCRATCH))
		return 0;
	double frac = (double)cur / (double)max;
	if (frac < mt_cfg.preoom - 0.05)
		preoom_armed = 1; /* well below again: the next crossing counts */
	if (!preoom_armed || frac < mt_cfg.preoom)
		return 0;
	preoom_armed = 0;
	struct dump_ctx c = {.kind = "preoom", .api = "cgroup", .requested = 0,
			     .cg_current = cur, .cg_max = max, .have_cg = 1};
	return dump(&c, "preoom");
}

extern char **environ;
static void render_locked(void);

/* The analysis command: beside the shim (a build tree) or in ../bin. */
static int
find_memtally(char *out, size_t n) {
	Dl_info di;
	if (!dladdr((void *)mt_oom_render, &di) || !di.dli_fname)
		return -1;
	const char *slash = strrchr(di.dli_fname, '/');
	size_t dir = slash ? (size_t)(slash - di.dli_fname) : 0;
	static const char *const rel[] = {"/memtally", "/../bin/memtally"};
	for (int i = 0; i < 2; i++) {
		if (dir + strlen(rel[i]) + 1 > n)
			return -1;
		memcpy(out, di.dli_fname, dir);
		memcpy(out + dir, rel[i], strlen(rel[i]) + 1);
		if (mt_sys(SYS_access, out, 1 /* X_OK */, 0, 0, 0, 0) == 0)
			return 0;
	}
	return -1;
}

void
mt_oom_render(int wait) {
	static mt_lock_t render_lock; /* the writer thread, or exit() */
	if (wait)
		mt_lock(&render_lock); /* exit: let the writer's renders finish */
	else if (!mt_trylock(&render_lock))
		return;
	render_locked();
	mt_unlock(&render_lock);
}

static void
render_locked(void) {
	static char exe[1100];
	static char *env[512];
	static char outs[3][1400];
	if (!exe[0] && find_memtally(exe, sizeof exe)) {
		mt_warn("MEMTALLY_OOM_RENDER: the memtally command is not beside the shim; not rendering");
		exe[0] = '?';
	}
	unsigned n = __atomic_load_n(&render_n, __ATOMIC_ACQUIRE);
	if (exe[0] == '?' || n == render_done)
		return;
	/* the children run without the shim (and its variables) */
	size_t e = 0;
	for (char **p = environ; p && *p && e < 511; p++)
		if (strncmp(*p, "LD_PRELOAD=", 11) && strncmp(*p, "MEMTALLY_", 9))
			env[e++] = *p;
	env[e] = NULL;
	static const char *const cmd[] = {"torch", "html", "flame"};
	static const char *const ext[] = {".pickle", ".html", ".svg"};
	for (unsigned d = render_done; d < n; d = render_done) {
		render_done = d + 1; /* and any queued meanwhile: the loop reads again */
		n = __atomic_load_n(&render_n, __ATOMIC_ACQUIRE);
		for (int c = 0; c < 3; c++) {
			struct mt_buf b;
			mt_buf_fixed(&b, outs[c], sizeof outs[c] - 1);
			mt_buf_puts(&b, render_paths[d]);
			if (b.len > 6 && !strcmp(outs[c] + b.len - 6, ".jsonl"))
				b.len -= 6;
			mt_buf_puts(&b, ext[c]);
			outs[c][b.len] = 0;
			char *argv[] = {exe, (char *)cmd[c], render_paths[d], "-o", outs[c], NULL};
			pid_t pid;
			/* the program's output stays the program's: the
			 * renderers write to /dev/null (the writer thread holds
			 * the guard, so what this allocates is not tracked) */
			posix_spawn_file_actions_t fa;
			posix_spawn_file_actions_init(&fa);
			posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
			posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
			int rc = posix_spawn(&pid, exe, &fa, NULL, argv, env);
			posix_spawn_file_actions_destroy(&fa);
			if (rc == 0) {
				int st;
				while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
					;
			}
		}
	}
}

void
mt_oom_postfork_child(int follow) {
	(void)follow;
	dump_lock.v = 0;
	pend_lock.v = 0;
	skipped = 0;
	memset(pend, 0, sizeof pend); /* the parent's dumps are the parent's */
	render_n = render_done = 0;
	preoom_armed = 1;
}
