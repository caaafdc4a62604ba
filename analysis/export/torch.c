/* torch.c — `memtally torch DUMP -o dump.pickle`: an OOM dump as the dict
 * torch.cuda.memory._snapshot() returns, so PyTorch's memory viewer and
 * `python -m torch.cuda._memory_viz` open it, laid out as PyTorch's own:
 *  - segments: one per live device allocation (cudaMalloc-like), each with
 *    one active block that tiles it exactly; VMM mappings as expandable
 *    segments; handles without an address and pinned host memory are not
 *    device segments and are left out;
 *  - device_traces, indexed by device ordinal and padded with empty lists:
 *    segment_alloc + alloc per allocation, free_requested + free_completed
 *    + segment_free per free, oom with device_free, oldest first; only
 *    events inside the dump's window are there, and frees of blocks
 *    allocated before it are left out, so undoing the trace from the
 *    segments never meets an unknown block;
 *  - frames {filename, line, name} from the symbolized stack, innermost
 *    first, as PyTorch's own; each block also has the `history` PyTorch
 *    1.13's _memory_viz reads ([{addr, real_size, frames}]).
 * --format 1.13 writes what torch.cuda.memory_snapshot() returned in 1.13:
 * the list of segments alone (1.13's `_memory_viz memory|segments` cannot
 * read the dict).
 *
 * With PyTorch's own snapshot of the moment beside the dump
 * (<dump>.torch.jsonl, _memtally/cuda.py), the pickle is that snapshot --
 * torch's segments, blocks (with history for 1.13) and device traces --
 * plus each driver allocation outside torch's segments (NCCL, cuBLAS,
 * other libraries: answer/join.h) as a segment of its own with one
 * active block, its innermost frame naming what it is ("[outside PyTorch:
 * NCCL]"), so the viewer shows the whole device.  VMM handles without an
 * address are left out (the viewer places memory by address). */
#include "cmd/cmd.h"
#include "export/pickle.h"
#include "answer/join.h"
#include "answer/sites.h"
#include "read/symbolize.h"
#include "base/util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Each stack's frame list is written once and stored in the memo (its
 * index + 1, indexed by stack); later uses fetch it: a real dump's 150 k
 * trace events made a 379 MB pickle without, 15 MB with.  frames_memo is
 * for the dump's stacks, tframes_memo for those of torch's snapshot. */
static uint32_t *frames_memo, *tframes_memo;

/* One frame: {filename, line, name}. */
static void
frame_dict(struct pk *p, const char *file, int64_t line, const char *name) {
	pk_dict(p);
	pk_str(p, "filename");
	pk_str(p, file);
	pk_str(p, "line");
	pk_int(p, line);
	pk_str(p, "name");
	pk_str(p, name);
	pk_close(p);
}

/* The frame dicts of a dump's stack, as items of the open list. */
static void
frame_items(struct pk *p, struct mfile *f, uint32_t stack) {
	struct frame fr[256];
	int n = site_frames(f, stack, fr, 256);
	for (int k = 0; k < n; k++) {
		char t[512];
		frame_dict(p, fr[k].file ? fr[k].file : fr[k].module ? fr[k].module : "??", fr[k].line,
			   fr[k].func ? fr[k].func : sym_text(&fr[k], t, sizeof t, 0));
	}
}

static void
frames(struct pk *p, struct mfile *f, uint32_t stack) {
	if (stack < f->nstacks && frames_memo[stack]) {
		pk_get(p, frames_memo[stack] - 1);
		return;
	}
	pk_list(p);
	frame_items(p, f, stack);
	pk_close(p);
	if (stack < f->nstacks)
		frames_memo[stack] = pk_put(p) + 1;
}

/* The frame list of a stack of torch's snapshot (0: none, an empty list). */
static void
tframes(struct pk *p, const struct tsnap *t, uint32_t stack) {
	if (stack && tframes_memo[stack]) {
		pk_get(p, tframes_memo[stack] - 1);
		return;
	}
	pk_list(p);
	for (int k = 0; stack && k < t->stacks[stack].n; k++) {
		const struct tframe *fr = &t->frames[t->stacks[stack].frames[k]];
		frame_dict(p, fr->file, fr->line, fr->name);
	}
	pk_close(p);
	uint32_t ix = pk_put(p);
	if (stack)
		tframes_memo[stack] = ix + 1;
}

/* Where a segment's, block's or trace entry's frames come from: a stack of
 * the dump or of torch's snapshot, or for a driver allocation outside
 * torch the dump's stack under a first frame naming its owner ("[outside
 * PyTorch: NCCL]"): a list of its own, written once and fetched after. */
struct fsrc {
	struct mfile *f;       /* the dump's stack, or */
	const struct tsnap *t; /* torch's */
	uint32_t stack;
	const char *owner;     /* with f: the first frame's name, or NULL */
	uint32_t memo;         /* owner's list: memo index + 1 once written */
};

static void
src_frames(struct pk *p, struct fsrc *s) {
	if (s->t) {
		tframes(p, s->t, s->stack);
		return;
	}
	if (!s->owner) {
		frames(p, s->f, s->stack);
		return;
	}
	if (s->memo) {
		pk_get(p, s->memo - 1);
		return;
	}
	pk_list(p);
	frame_dict(p, "memtally", 0, s->owner);
	frame_items(p, s->f, s->stack);
	pk_close(p);
	s->memo = pk_put(p) + 1;
}

/* A block's `history`, which PyTorch 1.13's _memory_viz reads its frames
 * from: one entry, the allocation that made it. */
static void
block_history(struct pk *p, uint64_t addr, uint64_t size, struct fsrc *src) {
	pk_str(p, "history");
	pk_list(p);
	pk_dict(p);
	pk_str(p, "addr");
	pk_uint(p, addr);
	pk_str(p, "real_size");
	pk_int(p, (int64_t)size);
	pk_str(p, "frames");
	src_frames(p, src);
	pk_close(p);
	pk_close(p);
}

/* One block: {address, size, requested_size, state, frames, history}; an
 * inactive block has no history (no allocation holds it). */
static void
write_block(struct pk *p, uint64_t addr, uint64_t size, uint64_t requested, const char *state,
	    struct fsrc *src) {
	pk_dict(p);
	pk_str(p, "address");
	pk_uint(p, addr);
	pk_str(p, "size");
	pk_int(p, (int64_t)size);
	pk_str(p, "requested_size");
	pk_int(p, (int64_t)requested);
	pk_str(p, "state");
	pk_str(p, state);
	pk_str(p, "frames");
	src_frames(p, src);
	if (strcmp(state, "inactive"))
		block_history(p, addr, size, src);
	pk_close(p);
}

/* A segment's fields before its frames and blocks. */
static void
seg_head(struct pk *p, int device, uint64_t addr, uint64_t size, int64_t allocated, int64_t active,
	 int64_t stream, const char *type, int expandable) {
	pk_str(p, "device");
	pk_int(p, device);
	pk_str(p, "address");
	pk_uint(p, addr);
	pk_str(p, "total_size");
	pk_int(p, (int64_t)size);
	pk_str(p, "allocated_size");
	pk_int(p, allocated);
	pk_str(p, "active_size");
	pk_int(p, active);
	pk_str(p, "requested_size");
	pk_int(p, allocated);
	pk_str(p, "stream");
	pk_int(p, stream);
	pk_str(p, "segment_type");
	pk_str(p, type);
	pk_str(p, "segment_pool_id");
	pk_pair(p, 0, 0);
	pk_str(p, "is_expandable");
	pk_bool(p, expandable);
}

/* A driver allocation as a segment with one active block that tiles it,
 * both with src's frames. */
static void
driver_segment(struct pk *p, const struct segment *s, struct fsrc *src) {
	pk_dict(p);
	seg_head(p, s->device < 0 ? 0 : s->device, s->addr, s->size, (int64_t)s->size, (int64_t)s->size,
		 s->stream, s->size <= (1 << 20) ? "small" : "large", s->mapped);
	pk_str(p, "frames");
	src_frames(p, src);
	pk_str(p, "blocks");
	pk_list(p);
	write_block(p, s->addr, s->size, s->size, "active_allocated", src);
	pk_close(p);
	pk_close(p);
}

static const char *const tstate[] = {"active_allocated", "active_pending_free", "inactive"};

/* One of torch's segments with its blocks, as torch's snapshot has them. */
static void
torch_segment(struct pk *p, const struct tsnap *t, const struct tseg *s) {
	int64_t alloc = 0, active = 0;
	for (size_t b = 0; b < s->nblocks; b++) {
		const struct tblock *bl = &t->blocks[s->block0 + b];
		alloc += bl->state == TB_ALLOCATED ? (int64_t)bl->size : 0;
		active += bl->state != TB_INACTIVE ? (int64_t)bl->size : 0;
	}
	pk_dict(p);
	seg_head(p, s->device, s->addr, s->size, alloc, active, s->stream, s->type[0] ? s->type : "large",
		 s->expandable);
	pk_str(p, "frames");
	tframes(p, t, s->stack);
	pk_str(p, "blocks");
	pk_list(p);
	for (size_t b = 0; b < s->nblocks; b++) {
		const struct tblock *bl = &t->blocks[s->block0 + b];
		write_block(p, bl->addr, bl->size, bl->requested, tstate[bl->state],
			    &(struct fsrc){.t = t, .stack = bl->stack});
	}
	pk_close(p);
	pk_close(p);
}

/* One device_traces entry: {action, [addr], [device_free], size, stream,
 * time_us, frames}; device_free < 0 leaves that field out. */
struct tentry {
	const char *action;
	int with_addr;
	uint64_t addr, size;
	int64_t device_free, stream, time_us;
};

static void
trace_entry(struct pk *p, const struct tentry *e, struct fsrc *src) {
	pk_dict(p);
	pk_str(p, "action");
	pk_str(p, e->action);
	if (e->with_addr) {
		pk_str(p, "addr");
		pk_uint(p, e->addr);
	}
	if (e->device_free >= 0) {
		pk_str(p, "device_free");
		pk_int(p, e->device_free);
	}
	pk_str(p, "size");
	pk_int(p, (int64_t)e->size);
	pk_str(p, "stream");
	pk_int(p, e->stream);
	pk_str(p, "time_us");
	pk_int(p, e->time_us);
	pk_str(p, "frames");
	src_frames(p, src);
	pk_close(p);
}

/* The pickle's start: PyTorch 2's {"segments": [...], "device_traces":
 * [...]}, or 1.13's list of segments alone; the segments' list is open. */
static void
snap_begin(struct pk *p, int v113) {
	pk_begin(p);
	if (!v113) {
		pk_dict(p);
		pk_str(p, "segments");
	}
	pk_list(p);
}

/* Its end, after the segments' list (and for PyTorch 2 device_traces). */
static void
snap_write(struct pk *p, const char *path, int v113) {
	if (!v113)
		pk_close(p);
	pk_end(p);
	write_output(path, p->out.p, p->out.len);
	pk_free(p);
}

/* --- a dump alone: its device segments and its events --- */

static int
device_seg(const struct segment *s) {
	return (s->kind == K_CUDA || s->kind == K_CUDA_MANAGED || (s->kind == K_CUDA_VMM && s->mapped)) &&
	       !s->is_handle;
}

static int
device_ev(const struct event *e) {
	return e->kind == K_CUDA || e->kind == K_CUDA_MANAGED;
}

/* Sorting helpers for ev_plan: (address, index) pairs. */
struct addr_ix { uint64_t addr; size_t ix; };

static int
cmp_addr_ix(const void *a, const void *b) {
	const struct addr_ix *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->ix < y->ix ? -1 : x->ix > y->ix;
}

/* Each event's device (from the last non-handle segment at its address,
 * else the OOM's device) and, for a free, whether an alloc of the same
 * address came before it in the window.  Sorting makes this n log n: the
 * first version rescanned the segments and the earlier events for every
 * event (quadratic: ~10 s for the default 100 k events). */
static void
ev_plan(const struct mfile *f, int *dev, unsigned char *keep) {
	size_t ns = 0, ne = f->nevents;
	struct addr_ix *segs = xmalloc((f->nsegs ? f->nsegs : 1) * sizeof *segs);
	for (size_t k = 0; k < f->nsegs; k++)
		if (!f->segs[k].is_handle)
			segs[ns++] = (struct addr_ix){f->segs[k].addr, k};
	xqsort(segs, ns, sizeof *segs, cmp_addr_ix);
	struct addr_ix *evs = xmalloc((ne ? ne : 1) * sizeof *evs);
	for (size_t i = 0; i < ne; i++)
		evs[i] = (struct addr_ix){f->events[i].addr, i};
	xqsort(evs, ne, sizeof *evs, cmp_addr_ix);
	size_t j = 0;
	for (size_t g = 0; g < ne;) { /* one group of events per address */
		uint64_t a = evs[g].addr;
		while (j < ns && segs[j].addr < a)
			j++;
		size_t last = SIZE_MAX; /* the last segment at a: it wins */
		for (size_t m = j; m < ns && segs[m].addr == a; m++)
			last = segs[m].ix;
		int d = last != SIZE_MAX ? f->segs[last].device : (int)f->oom->device;
		int alloc_seen = 0;
		for (; g < ne && evs[g].addr == a; g++) {
			const struct event *e = &f->events[evs[g].ix];
			dev[evs[g].ix] = d;
			keep[evs[g].ix] = strcmp(e->op, "free") || alloc_seen;
			alloc_seen |= !strcmp(e->op, "alloc");
		}
	}
	free(evs);
	free(segs);
}

/* A dump's event in device d's trace: the oom on the OOM's device; an
 * allocation as segment_alloc + alloc, a free as free_requested +
 * free_completed + segment_free, on its device (dev) and, for a free,
 * only of a block allocated inside the window (keep). */
static void
dump_event(struct pk *p, struct mfile *f, size_t i, int d, const int *dev, const unsigned char *keep) {
	const struct event *e = &f->events[i];
	struct fsrc src = {.f = f, .stack = e->stack};
	struct tentry te = {.addr = e->addr, .size = e->size, .device_free = -1,
			    .time_us = e->time_ms * 1000};
	if (!strcmp(e->op, "oom")) {
		if (d != f->oom->device)
			return;
		te.action = "oom";
		te.device_free = f->oom->drv_free > 0 ? f->oom->drv_free : 0;
		trace_entry(p, &te, &src);
		return;
	}
	if (!device_ev(e) || dev[i] != d || !keep[i])
		return;
	static const char *const al[] = {"segment_alloc", "alloc"};
	static const char *const fr[] = {"free_requested", "free_completed", "segment_free"};
	int is_free = !strcmp(e->op, "free");
	te.with_addr = 1;
	for (int k = 0; k < (is_free ? 3 : 2); k++) {
		te.action = is_free ? fr[k] : al[k];
		trace_entry(p, &te, &src);
	}
}

/* device_traces from a dump's events, one list per device ordinal up to
 * the highest of its device segments and the OOM's. */
static void
dump_traces(struct pk *p, struct mfile *f) {
	int ndev = 0;
	for (size_t i = 0; i < f->nsegs; i++)
		if (device_seg(&f->segs[i]) && f->segs[i].device + 1 > ndev)
			ndev = f->segs[i].device + 1;
	if (f->oom->device + 1 > ndev)
		ndev = (int)f->oom->device + 1;
	int *evdev = xmalloc((f->nevents ? f->nevents : 1) * sizeof *evdev);
	unsigned char *evkeep = xmalloc(f->nevents ? f->nevents : 1);
	ev_plan(f, evdev, evkeep);
	pk_str(p, "device_traces");
	pk_list(p);
	for (int d = 0; d < ndev; d++) {
		pk_list(p);
		for (size_t i = 0; i < f->nevents; i++)
			dump_event(p, f, i, d, evdev, evkeep);
		pk_close(p);
	}
	pk_close(p);
	free(evdev);
	free(evkeep);
}

static void
write_pickle(struct mfile *f, const char *path, int v113) {
	if (!f->oom || strcmp(f->oom->kind, "cuda"))
		die(EXIT_BAD_INPUT, "%s: not a CUDA OOM dump: `torch` needs the device segments "
				    "of a memtally.*.oom<N>.jsonl written on CUDA_ERROR_OUT_OF_MEMORY",
		    f->path);
	struct pk p;
	snap_begin(&p, v113);
	frames_memo = xcalloc(f->nstacks + 1, sizeof *frames_memo);
	for (size_t i = 0; i < f->nsegs; i++)
		if (device_seg(&f->segs[i]))
			driver_segment(&p, &f->segs[i], &(struct fsrc){.f = f, .stack = f->segs[i].stack});
	pk_close(&p);
	if (!v113)
		dump_traces(&p, f);
	snap_write(&p, path, v113);
	free(frames_memo);
}

/* --- the joined pickle: PyTorch's snapshot and the driver's rest --- */

/* device_traces as torch's snapshot has them, one list per device ordinal
 * up to the highest it names. */
static void
torch_traces(struct pk *p, const struct tsnap *t) {
	int ndev = (int)t->device + 1;
	for (size_t i = 1; i < t->nsegs; i++)
		if (t->segs[i].device + 1 > ndev)
			ndev = t->segs[i].device + 1;
	for (size_t i = 0; i < t->ntraces; i++)
		if (t->traces[i].device + 1 > ndev)
			ndev = t->traces[i].device + 1;
	pk_str(p, "device_traces");
	pk_list(p);
	for (int d = 0; d < ndev; d++) {
		pk_list(p);
		for (size_t i = 0; i < t->ntraces; i++) {
			const struct ttrace *e = &t->traces[i];
			if (e->device != d)
				continue;
			int oom = !strcmp(e->action, "oom");
			struct tentry te = {.action = e->action, .with_addr = !oom, .addr = e->addr,
					    .size = e->size, .stream = e->stream, .time_us = e->time_us,
					    .device_free = !oom ? -1 : e->device_free < 0 ? 0 : e->device_free};
			trace_entry(p, &te, &(struct fsrc){.t = t, .stack = e->stack});
		}
		pk_close(p);
	}
	pk_close(p);
}

static void
write_joined(struct mfile *f, const struct tsnap *t, const char *path, int v113) {
	struct join *jn = join_compute(f, t);
	struct pk p;
	snap_begin(&p, v113);
	frames_memo = xcalloc(f->nstacks + 1, sizeof *frames_memo);
	tframes_memo = xcalloc(t->nstacks + 1, sizeof *tframes_memo);
	for (size_t i = 1; i < t->nsegs; i++) /* torch's own, every device */
		torch_segment(&p, t, &t->segs[i]);
	for (size_t k = 0; k < jn->nouts; k++) { /* the driver's, outside torch */
		const struct jout *x = &jn->outs[k];
		if (x->seg == SIZE_MAX || f->segs[x->seg].is_handle)
			continue;
		const struct segment *s = &f->segs[x->seg];
		char what[96];
		snprintf(what, sizeof what, "[outside PyTorch: %s]", x->owner ? x->owner : "other");
		driver_segment(&p, s, &(struct fsrc){.f = f, .stack = s->stack, .owner = what});
	}
	pk_close(&p);
	if (!v113)
		torch_traces(&p, t);
	snap_write(&p, path, v113);
	free(frames_memo);
	free(tframes_memo);
	join_free(jn);
}

int
cmd_torch(struct opts *o) {
	struct run r;
	run_load_dumps(&r, o->paths, o->npaths);
	cmd_native(o, &r);
	if (r.nfiles != 1)
		die(EXIT_USAGE, "torch: %zu dumps found; name one dump file", r.nfiles);
	struct mfile *f = &r.files[0];
	struct tsnap *t = f->oom && !strcmp(f->oom->kind, "cuda") ? tsnap_for_dump(f) : NULL;
	if (t)
		write_joined(f, t, o->out, o->torch_version == 113);
	else
		write_pickle(f, o->out, o->torch_version == 113);
	fprintf(stderr, "memtally: wrote %s%s\n", o->out,
		t ? " (PyTorch's snapshot of the moment and the driver's allocations outside it)" : "");
	tsnap_free(t);
	return 0;
}
