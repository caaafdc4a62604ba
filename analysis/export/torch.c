/* torch.c — `memtally torch DUMP -o dump.pickle`: an OOM dump as the dict
 * torch.cuda.memory._snapshot() returns, so PyTorch's memory viewer and
 * `python -m torch.cuda._memory_viz` open it (shared/research/
 * torch_snapshot.md has the layout):
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
 * read the dict). */
#include "cmd/cmd.h"
#include "export/pickle.h"
#include "answer/sites.h"
#include "read/symbolize.h"
#include "base/util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void
frames(struct pk *p, struct mfile *f, uint32_t stack) {
	struct frame fr[256];
	int n = site_frames(f, stack, fr, 256);
	pk_list(p);
	for (int k = 0; k < n; k++) {
		char t[512];
		pk_dict(p);
		pk_str(p, "filename");
		pk_str(p, fr[k].file ? fr[k].file : fr[k].module ? fr[k].module : "??");
		pk_str(p, "line");
		pk_int(p, fr[k].line);
		pk_str(p, "name");
		pk_str(p, fr[k].func ? fr[k].func : sym_text(&fr[k], t, sizeof t, 0));
		pk_close(p);
	}
	pk_close(p);
}

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

/* One device_traces entry: {action, [addr], [device_free], size, stream,
 * time_us, frames}; addr < 0 leaves out the address (an oom), device_free
 * < 0 leaves out that field. */
static void
trace_entry(struct pk *p, struct mfile *f, const char *action, int64_t device_free,
	    const struct event *e, int with_addr) {
	pk_dict(p);
	pk_str(p, "action");
	pk_str(p, action);
	if (with_addr) {
		pk_str(p, "addr");
		pk_uint(p, e->addr);
	}
	if (device_free >= 0) {
		pk_str(p, "device_free");
		pk_int(p, device_free);
	}
	pk_str(p, "size");
	pk_int(p, (int64_t)e->size);
	pk_str(p, "stream");
	pk_int(p, 0);
	pk_str(p, "time_us");
	pk_int(p, e->time_ms * 1000);
	pk_str(p, "frames");
	frames(p, f, e->stack);
	pk_close(p);
}

static void
write_pickle(struct mfile *f, const char *path, int v113) {
	if (!f->oom || strcmp(f->oom->kind, "cuda"))
		die(EXIT_BAD_INPUT, "%s: not a CUDA OOM dump: `torch` needs the device segments "
				    "of a memtally.*.oom<N>.jsonl written on CUDA_ERROR_OUT_OF_MEMORY",
		    f->path);
	int ndev = 0;
	for (size_t i = 0; i < f->nsegs; i++)
		if (device_seg(&f->segs[i]) && f->segs[i].device + 1 > ndev)
			ndev = f->segs[i].device + 1;
	if (f->oom->device + 1 > ndev)
		ndev = (int)f->oom->device + 1;
	struct pk p;
	pk_begin(&p);
	if (!v113) { /* PyTorch 2: {"segments": [...], "device_traces": [...]} */
		pk_dict(&p);
		pk_str(&p, "segments");
	}
	pk_list(&p); /* PyTorch 1.13: the list of segments alone */
	for (size_t i = 0; i < f->nsegs; i++) {
		const struct segment *s = &f->segs[i];
		if (!device_seg(s))
			continue;
		pk_dict(&p);
		pk_str(&p, "device");
		pk_int(&p, s->device < 0 ? 0 : s->device);
		pk_str(&p, "address");
		pk_uint(&p, s->addr);
		pk_str(&p, "total_size");
		pk_int(&p, (int64_t)s->size);
		pk_str(&p, "allocated_size");
		pk_int(&p, (int64_t)s->size);
		pk_str(&p, "active_size");
		pk_int(&p, (int64_t)s->size);
		pk_str(&p, "requested_size");
		pk_int(&p, (int64_t)s->size);
		pk_str(&p, "stream");
		pk_int(&p, s->stream);
		pk_str(&p, "segment_type");
		pk_str(&p, s->size <= (1 << 20) ? "small" : "large");
		pk_str(&p, "segment_pool_id");
		pk_pair(&p, 0, 0);
		pk_str(&p, "is_expandable");
		pk_bool(&p, s->mapped);
		pk_str(&p, "frames");
		frames(&p, f, s->stack);
		pk_str(&p, "blocks");
		pk_list(&p);
		pk_dict(&p);
		pk_str(&p, "address");
		pk_uint(&p, s->addr);
		pk_str(&p, "size");
		pk_int(&p, (int64_t)s->size);
		pk_str(&p, "requested_size");
		pk_int(&p, (int64_t)s->size);
		pk_str(&p, "state");
		pk_str(&p, "active_allocated");
		pk_str(&p, "frames");
		frames(&p, f, s->stack);
		/* PyTorch 1.13's _memory_viz reads a block's frames from its
		 * history: one entry, the allocation that made it */
		pk_str(&p, "history");
		pk_list(&p);
		pk_dict(&p);
		pk_str(&p, "addr");
		pk_uint(&p, s->addr);
		pk_str(&p, "real_size");
		pk_int(&p, (int64_t)s->size);
		pk_str(&p, "frames");
		frames(&p, f, s->stack);
		pk_close(&p);
		pk_close(&p);
		pk_close(&p);
		pk_close(&p);
		pk_close(&p);
	}
	pk_close(&p);
	if (v113) {
		pk_end(&p);
		write_output(path, p.out.p, p.out.len);
		sb_free(&p.out);
		return;
	}
	/* device_traces: events inside the window, frees only of blocks
	 * allocated inside it */
	pk_str(&p, "device_traces");
	pk_list(&p);
	int *evdev = xmalloc((f->nevents ? f->nevents : 1) * sizeof *evdev);
	unsigned char *evkeep = xmalloc(f->nevents ? f->nevents : 1);
	ev_plan(f, evdev, evkeep);
	for (int d = 0; d < ndev; d++) {
		pk_list(&p);
		for (size_t i = 0; i < f->nevents; i++) {
			const struct event *e = &f->events[i];
			if (!strcmp(e->op, "oom")) {
				if (d != f->oom->device)
					continue;
				trace_entry(&p, f, "oom", f->oom->drv_free > 0 ? f->oom->drv_free : 0, e, 0);
				continue;
			}
			if (!device_ev(e))
				continue;
			/* frees of blocks allocated before the window are skipped */
			if (evdev[i] != d || !evkeep[i])
				continue;
			int is_free = !strcmp(e->op, "free");
			static const char *const al[] = {"segment_alloc", "alloc"};
			static const char *const fr[] = {"free_requested", "free_completed", "segment_free"};
			int n = is_free ? 3 : 2;
			for (int k = 0; k < n; k++)
				trace_entry(&p, f, is_free ? fr[k] : al[k], -1, e, 1);
		}
		pk_close(&p);
	}
	free(evdev);
	free(evkeep);
	pk_close(&p);
	pk_close(&p);
	pk_end(&p);
	write_output(path, p.out.p, p.out.len);
	sb_free(&p.out);
}

int
cmd_torch(struct opts *o) {
	struct run r;
	run_load_dumps(&r, o->paths, o->npaths);
	cmd_native(o, &r);
	if (r.nfiles != 1)
		die(EXIT_USAGE, "torch: %zu dumps found; name one dump file", r.nfiles);
	write_pickle(&r.files[0], o->out, o->torch_version == 113);
	fprintf(stderr, "memtally: wrote %s\n", o->out);
	return 0;
}
