/*
 * oom.c — the event ring, host OOM dumps and pre-OOM dumps (oom.h).
 *
 * A dump file holds, in order: header, maps, every stack, an `oom` record
 * (what failed), one `segment` line per live tracked allocation of the
 * failing kind (heap blocks from the pointer table, mappings from the map
 * table), the `trace` lines of the ring (oldest first), and a complete
 * snapshot with reason "oom" or "preoom".  It is streamed through a buffer
 * reserved at start (mt_buf_stream), so any number of segments fit.
 */
#include "glue.h"
#include "oom.h"
#include "buf.h"
#include "config.h"
#include "maptab.h"
#include "procstat.h"
#include "ptrtab.h"
#include "shim.h"
#include "sites.h"
#include "snapshot.h"
#include "cuda.h"
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

struct ev {
	uint64_t seq;    /* ring position + 1, written last (0 = empty/torn) */
	uint64_t time_ns;
	uintptr_t addr;
	uint64_t size;
	uint32_t stack;
	uint8_t op, kind;
	uint16_t pad;
};

static struct ev *ring;
static uint64_t ring_cap, ring_pos;
static mt_lock_t dump_lock;
static uint64_t ndumps, skipped;
static char *dump_mem;          /* streaming buffer */
static char *dump_scratch;      /* /proc reads */
#define DUMP_BUF (1u << 20)
#define DUMP_SCRATCH (64u << 10)
static int preoom_armed = 1;

int
mt_oom_init(void) {
	ring_cap = mt_cfg.trace;
	if (ring_cap) {
		long r = mt_sys(SYS_mmap, 0, ring_cap * sizeof *ring, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r < 0 && r > -4096)
			return ENOMEM;
		ring = (struct ev *)r;
	}
	dump_mem = mt_sys_mmap(DUMP_BUF + DUMP_SCRATCH);
	if (!dump_mem)
		return ENOMEM;
	dump_scratch = dump_mem + DUMP_BUF;
	return 0;
}

void
mt_event(int op, int kind, uintptr_t addr, uint64_t size, uint32_t stack) {
	if (!ring)
		return;
	uint64_t pos = __atomic_fetch_add(&ring_pos, 1, __ATOMIC_RELAXED);
	struct ev *e = &ring[pos % ring_cap];
	__atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
	e->time_ns = mt_now_ns();
	e->addr = addr;
	e->size = size;
	e->stack = stack;
	e->op = (uint8_t)op;
	e->kind = (uint8_t)kind;
	__atomic_store_n(&e->seq, pos + 1, __ATOMIC_RELEASE);
}

uint64_t
mt_oom_count(void) {
	return __atomic_load_n(&ndumps, __ATOMIC_RELAXED);
}

struct dump_ctx {
	const char *kind;        /* "host", "cuda" or "preoom" */
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
	mt_buf_printf(b, "{\"type\":\"segment\",\"kind\":\"%s\",\"%s\":\"",
		      mt_kind_names[e->kind], e->flags & MT_PTR_HANDLE ? "handle" : "address");
	mt_buf_hex(b, e->addr & ~MT_TAG_MASK);
	mt_buf_printf(b, "\",\"size\":%lu,\"stack\":%u,\"time_ms\":%u%s",
		      (unsigned long)e->size, e->stack, e->time_ms,
		      e->sampled ? ",\"sampled\":true" : "");
	if (cuda)
		mt_buf_printf(b, ",\"device\":%u,\"stream\":%u%s", e->device, e->stream,
			      e->flags & MT_PTR_MAPPED ? ",\"mapped\":true" : "");
	mt_buf_puts(b, "}\n");
}

static void
seg_map(const struct mt_map *m, void *arg) {
	struct dump_ctx *c = arg;
	struct mt_buf *b = c->b;
	if (!strcmp(c->kind, "cuda"))
		return;
	mt_buf_printf(b, "{\"type\":\"segment\",\"kind\":\"%s\",\"address\":\"",
		      mt_kind_names[m->kind]);
	mt_buf_hex(b, m->start);
	mt_buf_printf(b, "\",\"size\":%lu,\"stack\":%u,\"time_ms\":%u}\n",
		      (unsigned long)(m->end - m->start), m->stack, m->time_ms);
}

static void
trace(struct mt_buf *b) {
	if (!ring)
		return;
	uint64_t end = __atomic_load_n(&ring_pos, __ATOMIC_ACQUIRE);
	uint64_t start = end > ring_cap ? end - ring_cap : 0;
	static const char *const ops[] = {"?", "alloc", "free", "oom"};
	for (uint64_t p = start; p < end; p++) {
		struct ev e = ring[p % ring_cap];
		if (e.seq != p + 1)
			continue; /* overwritten or still being written */
		mt_buf_printf(b, "{\"type\":\"trace\",\"op\":\"%s\",\"kind\":\"%s\",\"address\":\"",
			      ops[e.op & 3], mt_kind_names[e.kind % MT_NKINDS]);
		mt_buf_hex(b, e.addr);
		mt_buf_printf(b, "\",\"size\":%lu,\"stack\":%u,\"time_ms\":%lu}\n",
			      (unsigned long)e.size, e.stack,
			      (unsigned long)(e.time_ns > mt_start_mono_ns
						      ? (e.time_ns - mt_start_mono_ns) / 1000000u
						      : 0));
	}
}

static void
body(struct mt_buf *b, void *arg) {
	struct dump_ctx *c = arg;
	mt_buf_printf(b, "{\"type\":\"oom\",\"kind\":\"%s\",\"api\":\"%s\","
			 "\"requested_bytes\":%lu,\"error\":\"%s\",\"sampled\":%s",
		      c->kind, c->api, (unsigned long)c->requested,
		      !strcmp(c->kind, "preoom") ? "cgroup_threshold"
		      : !strcmp(c->kind, "cuda") ? "CUDA_ERROR_OUT_OF_MEMORY"
						   : "ENOMEM",
		      mt_cfg.sample ? "true" : "false");
	if (c->have_cg)
		mt_buf_printf(b, ",\"cgroup_current_bytes\":%lu,\"cgroup_max_bytes\":%lu",
			      (unsigned long)c->cg_current, (unsigned long)c->cg_max);
	if (!strcmp(c->kind, "cuda")) {
		mt_buf_printf(b, ",\"device\":%d", c->device);
		if (c->drv_total)
			mt_buf_printf(b, ",\"driver_free_bytes\":%lu,\"driver_total_bytes\":%lu",
				      (unsigned long)c->drv_free, (unsigned long)c->drv_total);
	}
	mt_buf_printf(b, ",\"elapsed_ms\":%lu}\n", (unsigned long)mt_ms_since_start());
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
	if (ndumps < mt_cfg.oom_dumps) {
		char path[1300];
		long fd = mt_snapshot_dump_open((unsigned)ndumps + 1, path, sizeof path);
		if (fd >= 0) {
			struct mt_buf b;
			mt_buf_stream(&b, dump_mem, DUMP_BUF, (int)fd);
			int err = mt_snapshot_dump((int)fd, &b, reason, body, c, dump_scratch,
						   DUMP_SCRATCH);
			mt_sys(SYS_close, fd, 0, 0, 0, 0, 0);
			__atomic_store_n(&ndumps, ndumps + 1, __ATOMIC_RELEASE);
			if (err)
				mt_warn("OOM dump %s incomplete (errno %d)", path, err);
			wrote = 1;
		} else {
			mt_warn("cannot write OOM dump %s (errno %ld)", path, -fd);
			__atomic_store_n(&ndumps, ndumps + 1, __ATOMIC_RELEASE);
		}
	}
	mt_unlock(&dump_lock);
	return wrote;
}

void
mt_oom_host(const char *api, uint64_t requested) {
	mt_event(MT_EV_OOM, MT_HEAP, 0, requested, 0);
	struct dump_ctx c = {.kind = "host", .api = api, .requested = requested};
	c.have_cg = !mt_cgroup_usage(&c.cg_current, &c.cg_max, dump_scratch, DUMP_SCRATCH);
	dump(&c, "oom");
}

void
mt_oom_cuda(const char *api, uint64_t requested, int device, uint64_t drv_free,
	    uint64_t drv_total) {
	struct dump_ctx c = {.kind = "cuda", .api = api, .requested = requested,
			     .device = device, .drv_free = drv_free, .drv_total = drv_total};
	dump(&c, "oom");
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

void
mt_oom_postfork_child(void) {
	dump_lock.v = 0;
	ndumps = skipped = 0;
	ring_pos = 0;
	preoom_armed = 1;
}
