/* load.c — the streaming reader: each file is mapped and read a line at a
 * time; each line is parsed (json.c) and turned into the model (model.h).
 * Unknown record types and fields are ignored; a truncated last line is
 * dropped with a note; anything else malformed stops the command with
 * "memtally: FILE:LINE: reason" and exit code 1. */
#include "model/model.h"
#include "read/json.h"
#include <zstd.h>
#include "base/util.h"
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const kind_names[NKINDS] = MT_KIND_NAMES;

int
kind_parse(const char *s) {
	for (int k = 0; k < NKINDS; k++)
		if (!strcmp(s, kind_names[k]))
			return k;
	return -1;
}

struct ctx {
	struct mfile *f;
	struct jdoc *d;
	int line;
};

__attribute__((noreturn, format(printf, 2, 3))) static void
bad(struct ctx *c, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	die(EXIT_BAD_INPUT, "%s:%d: %s", c->f->path, c->line, msg);
}

static int64_t
need_int(struct ctx *c, struct jv *o, const char *key) {
	struct jv *v = json_get(c->d, o, key);
	if (!v)
		bad(c, "missing field \"%s\"", key);
	if (v->type != J_NUM || !v->is_int)
		bad(c, "field \"%s\" is not an integer", key);
	return v->i;
}

static int64_t
opt_int(struct ctx *c, struct jv *o, const char *key) {
	struct jv *v = json_get(c->d, o, key);
	if (!v || v->type == J_NULL)
		return -1;
	if (v->type != J_NUM)
		bad(c, "field \"%s\" is not a number", key);
	return v->i;
}

static char *
opt_str(struct ctx *c, struct jv *o, const char *key) {
	struct jv *v = json_get(c->d, o, key);
	if (!v || v->type == J_NULL)
		return NULL;
	if (v->type != J_STR)
		bad(c, "field \"%s\" is not a string", key);
	return xstrndup(v->s, v->len);
}

static void
header(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int64_t v = need_int(c, o, "version");
	if (v > MT_FORMAT_VERSION || v < 1)
		bad(c, "format version %lld; this memtally reads versions 1 to %d",
		    (long long)v, MT_FORMAT_VERSION);
	f->version = (int)v;
	f->pid = need_int(c, o, "pid");
	f->ppid = opt_int(c, o, "ppid");
	f->rank = opt_int(c, o, "rank");
	f->local_rank = opt_int(c, o, "local_rank");
	f->world_size = opt_int(c, o, "world_size");
	f->host = opt_str(c, o, "host");
	f->exe = opt_str(c, o, "exe");
	f->start_wall_ns = opt_int(c, o, "start_wall_ns");
	f->sample_bytes = opt_int(c, o, "sample_bytes");
	struct sb a = {0};
	struct jv *argv = json_get(c->d, o, "argv");
	if (argv && argv->type == J_ARR)
		for (struct jv *x = json_child(c->d, argv); x; x = json_next(c->d, x))
			if (x->type == J_STR) {
				if (a.len)
					sb_putc(&a, ' ');
				sb_puts(&a, x->s);
			}
	f->argv = a.p ? a.p : xstrdup("");
}

static uint64_t
need_hex(struct ctx *c, struct jv *o, const char *key) {
	uint64_t x;
	if (!json_hex(json_get(c->d, o, key), &x))
		bad(c, "field \"%s\" is not a \"0x...\" address", key);
	return x;
}

/* The slot of module (start, end, path) in f's index, or of the empty
 * slot where it would go (the index doubles at half full).  Keeping each
 * module once was a scan of all before it: quadratic on 300 k modules. */
static size_t *
mod_slot(struct mfile *f, uint64_t start, uint64_t end, const char *path) {
	if ((f->nmods + 1) * 2 > f->modix_cap) {
		size_t cap = f->modix_cap ? f->modix_cap * 2 : 256;
		size_t *ix = xcalloc(cap, sizeof *ix);
		for (size_t i = 0; i < f->nmods; i++) {
			uint64_t h = (f->mods[i].start * 0x9e3779b97f4a7c15ull) ^ f->mods[i].end;
			size_t j = (size_t)(h >> 7) & (cap - 1);
			while (ix[j])
				j = (j + 1) & (cap - 1);
			ix[j] = i + 1;
		}
		free(f->modix);
		f->modix = ix;
		f->modix_cap = cap;
	}
	uint64_t h = (start * 0x9e3779b97f4a7c15ull) ^ end;
	size_t j = (size_t)(h >> 7) & (f->modix_cap - 1);
	while (f->modix[j]) {
		const struct module *m = &f->mods[f->modix[j] - 1];
		if (m->start == start && m->end == end && !strcmp(m->path, path))
			break;
		j = (j + 1) & (f->modix_cap - 1);
	}
	return &f->modix[j];
}

static void
maps(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	struct jv *mods = json_get(c->d, o, "modules");
	if (!mods || mods->type != J_ARR)
		bad(c, "maps record without a \"modules\" array");
	for (struct jv *m = json_child(c->d, mods); m; m = json_next(c->d, m)) {
		struct module mod = {0};
		mod.path = opt_str(c, m, "path");
		if (!mod.path)
			bad(c, "module without a path");
		mod.base = need_hex(c, m, "base");
		mod.start = need_hex(c, m, "start");
		mod.end = need_hex(c, m, "end");
		struct jv *off = json_get(c->d, m, "offset");
		if (off)
			mod.offset = need_hex(c, m, "offset");
		mod.build_id = opt_str(c, m, "build_id");
		size_t *slot = mod_slot(f, mod.start, mod.end, mod.path); /* keep each once */
		if (*slot) {
			free(mod.path);
			free(mod.build_id);
			continue;
		}
		f->mods = xgrow(f->mods, f->nmods + 1, &f->cap_mods, sizeof *f->mods);
		f->mods[f->nmods++] = mod;
		*slot = f->nmods;
	}
}

/* Ids in a file are the shim's: dense from 1 in one process, but a
 * fork child's start where its parent's stopped, and a hostile file may
 * name any id.  Each record table is stored dense, in the order records
 * arrive (index 0 is "none"), and an open-addressing map takes a file's
 * id to its index: memory follows the records a file holds, never the
 * size of an id. */
static uint32_t
idmap_get(const struct idmap *m, int64_t id) {
	if (!m->cap)
		return 0;
	size_t j = (size_t)(((uint64_t)id * 0x9e3779b97f4a7c15ull) >> 20) & (m->cap - 1);
	while (m->ix[j]) {
		if (m->id[j] == id)
			return m->ix[j];
		j = (j + 1) & (m->cap - 1);
	}
	return 0;
}

static void
idmap_put(struct idmap *m, int64_t id, uint32_t ix) {
	if ((m->n + 1) * 2 > m->cap) {
		struct idmap g = {0};
		g.cap = m->cap ? m->cap * 2 : 256;
		g.id = xcalloc(g.cap, sizeof *g.id);
		g.ix = xcalloc(g.cap, sizeof *g.ix);
		for (size_t i = 0; i < m->cap; i++)
			if (m->ix[i])
				idmap_put(&g, m->id[i], m->ix[i]);
		free(m->id);
		free(m->ix);
		*m = g;
	}
	size_t j = (size_t)(((uint64_t)id * 0x9e3779b97f4a7c15ull) >> 20) & (m->cap - 1);
	while (m->ix[j] && m->id[j] != id)
		j = (j + 1) & (m->cap - 1);
	if (!m->ix[j])
		m->n++;
	m->id[j] = id;
	m->ix[j] = ix;
}

/* The index for a record with this id: the one an earlier record of the
 * same id took (the later one replaces it), else a new zeroed slot at the
 * end of the table. */
static uint32_t
id_slot(struct ctx *c, struct idmap *m, void **v, size_t *n, size_t *cap, size_t elem,
	int64_t id, const char *what) {
	if (id < 1 || id > INT32_MAX)
		bad(c, "%s id %lld out of range (1..%d)", what, (long long)id, INT32_MAX);
	uint32_t ix = idmap_get(m, id);
	if (ix)
		return ix;
	if (*n == 0)
		*n = 1; /* index 0: no record */
	*v = xgrow(*v, *n + 1, cap, elem);
	memset((char *)*v + *n * elem, 0, elem);
	ix = (uint32_t)(*n)++;
	idmap_put(m, id, ix);
	return ix;
}

/* A reference to a stack from a call site, segment or trace: its index,
 * 0 for none (id 0) or, where the file has no such stack, 0 and *missing. */
static uint32_t
stack_ref(const struct mfile *f, int64_t id, int *missing) {
	uint32_t ix = id > 0 ? idmap_get(&f->stackmap, id) : 0;
	if (id != 0 && !ix && missing)
		*missing = 1;
	return ix;
}

static void
stack(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int64_t id = need_int(c, o, "id");
	uint32_t ix = id_slot(c, &f->stackmap, (void **)&f->stacks, &f->nstacks, &f->cap_stacks,
			      sizeof *f->stacks, id, "stack");
	struct jv *pcs = json_get(c->d, o, "pcs");
	if (!pcs || pcs->type != J_ARR)
		bad(c, "stack record without a \"pcs\" array");
	struct stack *s = &f->stacks[ix];
	free(s->pcs);
	s->pcs = NULL;
	s->id = id;
	s->py = -1;
	struct jv *py = json_get(c->d, o, "py");
	if (py && py->type != J_NULL) {
		if (py->type != J_NUM || py->i < 0)
			bad(c, "stack %lld: \"py\" is not a pystack id", (long long)id);
		s->py = 0;
		if (py->i > 0) {
			uint32_t p = idmap_get(&f->pystackmap, py->i);
			if (!p || !f->pystacks[p].frames)
				bad(c, "stack %lld refers to pystack %lld, which has no record before it",
				    (long long)id, (long long)py->i);
			s->py = p;
		}
	}
	/* Format 3: "up" and "keep" say its outer frames are the outermost
	 * keep frames of an earlier stack record. */
	int64_t up = opt_int(c, o, "up"), keep = 0;
	const struct stack *u = NULL;
	if (up != -1) {
		uint32_t ui = up > 0 ? idmap_get(&f->stackmap, up) : 0;
		if (!ui || !f->stacks[ui].pcs || ui == ix)
			bad(c, "stack %lld: \"up\" names stack %lld, which has no record before it",
			    (long long)id, (long long)up);
		u = &f->stacks[ui];
		keep = need_int(c, o, "keep");
		if (keep < 0 || keep > u->n)
			bad(c, "stack %lld: \"keep\" is %lld, stack %lld has %d frames", (long long)id,
			    (long long)keep, (long long)up, u->n);
	}
	/* A shared stack is no deeper than the shim captures, so a line of
	 * a few bytes cannot stand for more than MT_MAX_DEPTH frames. */
	if (u && pcs->len + (size_t)keep > MT_MAX_DEPTH)
		bad(c, "stack %lld has %zu frames; a stack with \"up\" has at most %d", (long long)id,
		    pcs->len + (size_t)keep, MT_MAX_DEPTH);
	s = &f->stacks[ix]; /* (u points into the same array: no growth since) */
	s->n = (int)pcs->len + (int)keep;
	s->pcs = xmalloc((size_t)s->n * sizeof *s->pcs + 1);
	int i = 0;
	for (struct jv *x = json_child(c->d, pcs); x; x = json_next(c->d, x))
		if (!json_hex(x, &s->pcs[i++]))
			bad(c, "stack %lld: a pc is not a \"0x...\" address", (long long)id);
	if (keep)
		memcpy(s->pcs + i, u->pcs + (u->n - keep), (size_t)keep * sizeof *s->pcs);
}

static void
pyframe(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int64_t id = need_int(c, o, "id");
	uint32_t ix = id_slot(c, &f->pyframemap, (void **)&f->pyframes, &f->npyframes,
			      &f->cap_pyframes, sizeof *f->pyframes, id, "pyframe");
	struct pyframe *p = &f->pyframes[ix];
	free(p->file);
	free(p->func);
	p->file = opt_str(c, o, "file");
	p->func = opt_str(c, o, "func");
	if (!p->file || !p->func)
		bad(c, "pyframe %lld without \"file\" and \"func\" strings", (long long)id);
	p->line = (int)need_int(c, o, "line");
}

static void
pystack(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int64_t id = need_int(c, o, "id");
	struct jv *fr = json_get(c->d, o, "frames"), *en = json_get(c->d, o, "entry");
	if (!fr || fr->type != J_ARR || !en || en->type != J_ARR || en->len != fr->len)
		bad(c, "pystack %lld: \"frames\" and \"entry\" must be arrays of one length",
		    (long long)id);
	uint32_t ix = id_slot(c, &f->pystackmap, (void **)&f->pystacks, &f->npystacks,
			      &f->cap_pystacks, sizeof *f->pystacks, id, "pystack");
	struct pystack *p = &f->pystacks[ix];
	free(p->frames);
	free(p->entry);
	p->n = (int)fr->len;
	p->frames = xmalloc((size_t)p->n * sizeof *p->frames + 1);
	p->entry = xmalloc((size_t)p->n + 1);
	int i = 0;
	for (struct jv *x = json_child(c->d, fr); x; x = json_next(c->d, x), i++) {
		uint32_t fx = x->type == J_NUM && x->i > 0 ? idmap_get(&f->pyframemap, x->i) : 0;
		if (!fx || !f->pyframes[fx].file)
			bad(c, "pystack %lld: frame %d is not a pyframe written before it",
			    (long long)id, i);
		p->frames[i] = fx;
	}
	i = 0;
	for (struct jv *x = json_child(c->d, en); x; x = json_next(c->d, x), i++)
		p->entry[i] = x->type == J_NUM && x->i;
	struct jv *t = json_get(c->d, o, "truncated");
	p->truncated = t && t->type == J_TRUE;
}

static void
totals(struct ctx *c, struct jv *o, struct totals *t) {
	t->present = 1;
	t->live_bytes = json_int(c->d, o, "live_bytes", 0);
	t->live_count = json_int(c->d, o, "live_count", 0);
	t->allocs = json_int(c->d, o, "allocs", 0);
	t->alloc_bytes = json_int(c->d, o, "alloc_bytes", 0);
	t->frees = json_int(c->d, o, "frees", 0);
	t->free_bytes = json_int(c->d, o, "free_bytes", 0);
	t->peak_bytes = json_int(c->d, o, "peak_bytes", 0);
}

static void devtorch_read(struct ctx *c, struct snap *s, struct jv *x, int64_t d);

static void
snapshot(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	f->snaps = xgrow(f->snaps, f->nsnaps + 1, &f->cap_snaps, sizeof *f->snaps);
	struct snap *s = &f->snaps[f->nsnaps];
	memset(s, 0, sizeof *s);
	s->line = c->line;
	s->seq = need_int(c, o, "seq");
	const char *r = json_str(c->d, o, "reason");
	if (!r)
		bad(c, "snapshot without a \"reason\"");
	snprintf(s->reason, sizeof s->reason, "%s", r);
	s->label = opt_str(c, o, "label");
	s->wall_ns = json_int(c->d, o, "wall_ns", 0);
	s->mono_ns = json_int(c->d, o, "mono_ns", 0);
	s->elapsed_ms = need_int(c, o, "elapsed_ms");
	struct jv *p = json_get(c->d, o, "proc");
	s->rss_bytes = json_int(c->d, p, "rss_bytes", -1);
	s->vms_bytes = json_int(c->d, p, "vms_bytes", -1);
	s->pss_bytes = json_int(c->d, p, "pss_bytes", -1);
	s->cg_current = json_int(c->d, json_get(c->d, o, "cgroup"), "current_bytes", -1);
	s->cg_max = json_int(c->d, json_get(c->d, o, "cgroup"), "max_bytes", -1); /* null: no limit */
	/* the allocator's footprint: glibc's arenas plus its mmapped
	 * blocks, or jemalloc's resident bytes */
	struct jv *al = json_get(c->d, o, "allocator");
	s->alloc_footprint = -1;
	if (al && al->type == J_OBJ) {
		int64_t ar = json_int(c->d, al, "arena_bytes", -1),
			hb = json_int(c->d, al, "hblkhd_bytes", -1),
			rs = json_int(c->d, al, "resident_bytes", -1);
		s->alloc_footprint = ar >= 0 && hb >= 0 ? ar + hb : rs;
	}
	for (int d = 0; d < MAX_DEVS; d++)
		s->dev_live[d] = -1;
	struct jv *devs = json_get(c->d, o, "devices");
	if (devs && devs->type == J_ARR)
		for (struct jv *x = json_child(c->d, devs); x; x = json_next(c->d, x)) {
			int64_t d = json_int(c->d, x, "device", -1);
			if (d >= 0 && d < MAX_DEVS)
				s->dev_live[d] = json_int(c->d, x, "live_bytes", 0);
			devtorch_read(c, s, x, d);
		}
	for (int k = 0; k < NKINDS; k++) {
		struct jv *t = json_get(c->d, o, kind_names[k]);
		if (t && t->type == J_OBJ)
			totals(c, t, &s->tot[k]);
	}
	struct jv *sh = json_get(c->d, o, "shim");
	s->dropped_stacks = json_int(c->d, sh, "dropped_stacks", 0);
	s->dropped_live = json_int(c->d, sh, "dropped_live", 0);
	s->shim_bytes = json_int(c->d, sh, "memory_bytes", 0);
	struct jv *mk = json_get(c->d, o, "marks");
	if (mk && mk->type == J_OBJ)
		for (struct jv *x = json_child(c->d, mk); x && s->nmarks < MAX_MARKS; x = json_next(c->d, x))
			if (x->type == J_NUM) {
				s->marks[s->nmarks].name = xstrndup(x->key, x->keylen);
				s->marks[s->nmarks++].value = x->d;
			}
	const char *mode = json_str(c->d, o, "callsites_mode");
	s->mode = !mode || !strcmp(mode, "full") ? SITES_FULL
		  : !strcmp(mode, "delta")       ? SITES_DELTA
		  : !strcmp(mode, "top")         ? SITES_TOP
						 : -1;
	if (s->mode < 0)
		bad(c, "unknown callsites_mode \"%s\"", mode);
	if (s->mode == SITES_DELTA && !f->nsnaps)
		bad(c, "the first snapshot of a file cannot be a delta");
	struct jv *cs = json_get(c->d, o, "callsites");
	if (!cs || cs->type != J_ARR)
		bad(c, "snapshot without a \"callsites\" array");
	s->sites = xmalloc(cs->len * sizeof *s->sites);
	for (struct jv *x = json_child(c->d, cs); x; x = json_next(c->d, x)) {
		struct site *t = &s->sites[s->nsites];
		if (x->type != J_OBJ)
			bad(c, "a call site is not an object");
		/* One pass over the members (the reader's hot loop). */
		int64_t id = -1;
		int kind = -2, have_live = 0;
		memset(t, 0, sizeof *t);
		t->at_peak_bytes = -1; /* files before at_peak_bytes */
		t->peak_ms = -1;       /* files before peak_ms / peak_step */
		t->peak_step = NAN;
		for (struct jv *m = json_child(c->d, x); m; m = json_next(c->d, m)) {
			const char *k = m->key;
			uint32_t kl = m->keylen;
			if (m->type == J_STR && kl == 4 && !memcmp(k, "kind", 4)) {
				kind = kind_parse(m->s);
				continue;
			}
			if (m->type == J_NUM && kl == 9 && !memcmp(k, "peak_step", 9)) {
				t->peak_step = m->d;
				continue;
			}
			if (m->type != J_NUM || !m->is_int)
				continue;
			int64_t v = m->i;
			switch (kl) {
			case 5:
				if (!memcmp(k, "stack", 5))
					id = v;
				else if (!memcmp(k, "frees", 5))
					t->frees = v;
				break;
			case 6:
				if (!memcmp(k, "allocs", 6))
					t->allocs = v;
				break;
			case 7:
				if (!memcmp(k, "peak_ms", 7))
					t->peak_ms = v;
				break;
			case 10:
				if (!memcmp(k, "live_bytes", 10))
					t->live_bytes = v, have_live = 1;
				else if (!memcmp(k, "live_count", 10))
					t->live_count = v;
				else if (!memcmp(k, "peak_bytes", 10))
					t->peak_bytes = v;
				break;
			case 11:
				if (!memcmp(k, "alloc_bytes", 11))
					t->alloc_bytes = v;
				break;
			case 13:
				if (!memcmp(k, "at_peak_bytes", 13))
					t->at_peak_bytes = v;
				break;
			}
		}
		if (id < 0)
			bad(c, "call site without an integer \"stack\"");
		if (!have_live)
			bad(c, "call site without an integer \"live_bytes\"");
		if (kind == -2)
			bad(c, "call site without a \"kind\"");
		int missing = 0;
		uint32_t ix = stack_ref(f, id, &missing);
		if (missing || (ix && !f->stacks[ix].pcs))
			bad(c, "call site refers to stack %lld, which has no earlier stack record",
			    (long long)id);
		if (kind < 0)
			continue; /* a kind from a newer shim: ignored */
		t->stack = ix;
		t->kind = (uint8_t)kind;
		s->nsites++;
	}
	f->nsnaps++;
}

/* A record's CUDA device ordinal, -1 when absent.  The shim keeps one
 * in a byte; anything beyond is not from it (and would size tables). */
static int64_t
device_ordinal(struct ctx *c, struct jv *o) {
	int64_t d = json_int(c->d, o, "device", -1);
	if (d < -1 || d > 255)
		bad(c, "device ordinal %lld out of range (0..255)", (long long)d);
	return d;
}

/* A device's `torch` object (PyTorch's caching allocator at a step). */
static void
devtorch_read(struct ctx *c, struct snap *s, struct jv *x, int64_t d) {
	struct jv *t = json_get(c->d, x, "torch");
	if (!t || t->type != J_OBJ || d < 0 || d > 255)
		return;
	struct devtorch v = {.device = (int)d,
			     .allocated = json_int(c->d, t, "allocated_bytes", -1),
			     .reserved = json_int(c->d, t, "reserved_bytes", -1),
			     .active = json_int(c->d, t, "active_bytes", -1),
			     .inactive_split = json_int(c->d, t, "inactive_split_bytes", -1),
			     .step = json_num(c->d, t, "step", -1)};
	if (v.allocated < 0 || v.reserved < 0 || v.active < 0 || v.inactive_split < 0)
		bad(c, "devices[].torch: a byte figure missing or negative");
	s->torch = xrealloc(s->torch, (size_t)(s->ntorch + 1) * sizeof *s->torch);
	s->torch[s->ntorch++] = v;
}

/* An OOM dump's outcome line (appended when what became of the failure
 * was known). */
static void
outcome_record(struct ctx *c, struct jv *o) {
	struct oominfo *m = c->f->oom;
	const char *k = json_str(c->d, o, "outcome");
	if (!m)
		bad(c, "an outcome record before the oom record");
	if (!k)
		bad(c, "outcome record without an \"outcome\"");
	snprintf(m->outcome, sizeof m->outcome, "%s", k);
	m->out_ms = json_int(c->d, o, "time_ms", -1);
	m->out_frees = json_int(c->d, o, "frees", 0);
	m->out_freed = json_int(c->d, o, "freed_bytes", 0);
	const char *by = json_str(c->d, o, "by");
	m->by_torch = by && !strcmp(by, "torch");
	m->torch_size = json_int(c->d, o, "torch_size", -1);
	m->torch_limit = json_int(c->d, o, "torch_limit_bytes", -1);
	m->torch_free = json_int(c->d, o, "torch_free_bytes", -1);
	const char *ts = json_str(c->d, o, "torch_snapshot");
	if (ts && (strchr(ts, '/') || strlen(ts) >= sizeof m->torch_snapshot))
		bad(c, "outcome: torch_snapshot must be a file name beside the dump");
	snprintf(m->torch_snapshot, sizeof m->torch_snapshot, "%s", ts ? ts : "");
}

static void
oom_record(struct ctx *c, struct jv *o) {
	struct oominfo *m = xcalloc(1, sizeof *m);
	const char *k = json_str(c->d, o, "kind"), *api = json_str(c->d, o, "api"),
		   *err = json_str(c->d, o, "error");
	if (!k)
		bad(c, "oom record without a \"kind\"");
	snprintf(m->kind, sizeof m->kind, "%s", k);
	snprintf(m->api, sizeof m->api, "%s", api ? api : "?");
	snprintf(m->error, sizeof m->error, "%s", err ? err : "?");
	m->requested = json_int(c->d, o, "requested_bytes", 0);
	m->device = device_ordinal(c, o);
	m->drv_free = json_int(c->d, o, "driver_free_bytes", -1);
	m->drv_total = json_int(c->d, o, "driver_total_bytes", -1);
	m->cg_current = json_int(c->d, o, "cgroup_current_bytes", -1);
	m->cg_max = json_int(c->d, o, "cgroup_max_bytes", -1);
	m->elapsed_ms = json_int(c->d, o, "elapsed_ms", 0);
	struct jv *sm = json_get(c->d, o, "sampled");
	m->sampled = sm && sm->type == J_TRUE;
	free(c->f->oom);
	c->f->oom = m;
}

static int
kind_of(struct ctx *c, struct jv *o) {
	const char *k = json_str(c->d, o, "kind");
	int kind = k ? kind_parse(k) : -1;
	if (!k)
		bad(c, "record without a \"kind\"");
	return kind;
}

static void
segment(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int kind = kind_of(c, o);
	if (kind < 0)
		return;
	f->segs = xgrow(f->segs, f->nsegs + 1, &f->cap_segs, sizeof *f->segs);
	struct segment *s = &f->segs[f->nsegs++];
	memset(s, 0, sizeof *s);
	s->kind = kind;
	struct jv *a = json_get(c->d, o, "address"), *h = json_get(c->d, o, "handle");
	s->is_handle = a == NULL && h != NULL;
	if (!json_hex(a ? a : h, &s->addr))
		bad(c, "segment without an \"address\" or \"handle\"");
	s->size = (uint64_t)need_int(c, o, "size");
	s->stack = stack_ref(f, json_int(c->d, o, "stack", 0), NULL);
	s->time_ms = json_int(c->d, o, "time_ms", 0);
	s->device = (int)device_ordinal(c, o);
	s->stream = (int)json_int(c->d, o, "stream", 0);
	struct jv *m = json_get(c->d, o, "mapped"), *sp = json_get(c->d, o, "sampled");
	s->mapped = m && m->type == J_TRUE;
	s->sampled = sp && sp->type == J_TRUE;
}

static void
trace(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int kind = kind_of(c, o);
	if (kind < 0)
		return;
	f->events = xgrow(f->events, f->nevents + 1, &f->cap_events, sizeof *f->events);
	struct event *e = &f->events[f->nevents++];
	memset(e, 0, sizeof *e);
	const char *op = json_str(c->d, o, "op");
	snprintf(e->op, sizeof e->op, "%s", op ? op : "?");
	e->kind = kind;
	json_hex(json_get(c->d, o, "address"), &e->addr);
	e->size = (uint64_t)json_int(c->d, o, "size", 0);
	e->stack = stack_ref(f, json_int(c->d, o, "stack", 0), NULL);
	e->time_ms = json_int(c->d, o, "time_ms", 0);
}

/* One record: parse the line (in place) and fold it into the model.
 * Returns 0, or -1 for a line that does not parse when it is the last one
 * and has no newline (a write cut short). */
static int
record(struct ctx *c, char *p, size_t len, int last) {
	const char *err;
	size_t col;
	struct jv *o = json_parse(c->d, p, len, &err, &col);
	if (!o) {
		if (last)
			return -1;
		bad(c, "%s (column %zu)", err, col + 1);
	}
	if (o->type != J_OBJ)
		bad(c, "a record must be a JSON object");
	const char *type = json_str(c->d, o, "type");
	if (!type)
		bad(c, "record without a \"type\"");
	if (c->line == 1 && strcmp(type, "header"))
		bad(c, "not a memtally file: the first record is \"%s\", not a header", type);
	if (!strcmp(type, "header")) {
		if (c->line != 1)
			bad(c, "a second header record");
		header(c, o);
	} else if (!strcmp(type, "maps")) {
		maps(c, o);
	} else if (!strcmp(type, "stack")) {
		stack(c, o);
	} else if (!strcmp(type, "pyframe")) {
		pyframe(c, o);
	} else if (!strcmp(type, "pystack")) {
		pystack(c, o);
	} else if (!strcmp(type, "python")) {
		free(c->f->python);
		c->f->python = opt_str(c, o, "version");
		if (!c->f->python)
			c->f->python = xstrdup("?");
	} else if (!strcmp(type, "snapshot")) {
		snapshot(c, o);
	} else if (!strcmp(type, "oom")) {
		oom_record(c, o);
	} else if (!strcmp(type, "outcome")) {
		outcome_record(c, o);
	} else if (!strcmp(type, "segment")) {
		segment(c, o);
	} else if (!strcmp(type, "trace")) {
		trace(c, o);
	} /* other types: ignored (readers of newer files) */
	return 0;
}

/* The whole lines in buf[0..have) into the model; what follows the last
 * newline (a line not complete yet) is moved to the front; its length
 * is returned.  *lines (if given) counts the lines taken. */
static size_t
whole_lines(struct ctx *c, char *buf, size_t have, long *lines) {
	char *p = buf, *end = buf + have;
	for (;;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		c->line++;
		if (nl > p)
			record(c, p, (size_t)(nl - p), 0);
		if (lines)
			(*lines)++;
		p = nl + 1;
	}
	have = (size_t)(end - p);
	if (have) /* memmove(NULL, ..., 0) is undefined */
		memmove(buf, p, have);
	return have;
}

/* A file's bytes as JSONL: read as they are, or decompressed when the
 * file begins with zstd's magic (MEMTALLY_COMPRESS=1 writes a frame per
 * snapshot; any concatenation of frames reads as one stream, and a last
 * frame cut short gives what it holds). */
struct src {
	const char *path;
	int fd;
	int mode;             /* 0: not known yet, 1: plain, 2: zstd */
	ZSTD_DStream *z;
	char *in;             /* compressed bytes read, in[pos..len) not decoded */
	size_t len, pos;
	uint64_t raw;         /* bytes read from the file */
};
#define SRC_IN (1u << 20)

static const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};

/* Up to cap bytes of JSONL into dst; 0 when the file has no more now
 * (or, with wait, too few bytes yet to tell its kind); -1 and errno on a
 * read error.  A corrupt compressed stream is bad input, named. */
static ssize_t
src_read(struct src *s, char *dst, size_t cap, int wait) {
	if (!s->mode) {
		unsigned char m[4];
		ssize_t r = pread(s->fd, m, sizeof m, 0);
		if (r < 0)
			return -1;
		if (r < 4 && wait)
			return 0;
		s->mode = r == 4 && !memcmp(m, zstd_magic, 4) ? 2 : 1;
		if (s->mode == 2) {
			s->z = ZSTD_createDStream();
			s->in = xmalloc(SRC_IN);
			if (!s->z)
				die(EXIT_BAD_INPUT, "%s: no memory for zstd", s->path);
		}
	}
	if (s->mode == 1) {
		ssize_t r = read(s->fd, dst, cap);
		if (r > 0)
			s->raw += (uint64_t)r;
		return r;
	}
	for (;;) {
		ZSTD_inBuffer in = {s->in, s->len, s->pos};
		ZSTD_outBuffer out = {dst, cap, 0};
		size_t rc = ZSTD_decompressStream(s->z, &out, &in);
		s->pos = in.pos;
		if (ZSTD_isError(rc))
			die(EXIT_BAD_INPUT, "%s: corrupt zstd data near byte %llu: %s", s->path,
			    (unsigned long long)(s->raw - (s->len - s->pos)), ZSTD_getErrorName(rc));
		if (out.pos)
			return (ssize_t)out.pos;
		if (s->pos < s->len)
			continue;
		ssize_t r = read(s->fd, s->in, SRC_IN);
		if (r <= 0)
			return r;
		s->raw += (uint64_t)r;
		s->len = (size_t)r;
		s->pos = 0;
	}
}

static void
src_close(struct src *s) {
	close(s->fd);
	ZSTD_freeDStream(s->z);
	free(s->in);
}

/* An input file opened for reading: a regular file, or bad input named. */
static int
open_input(const char *path, struct stat *st) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, st))
		die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st->st_mode))
		die(EXIT_BAD_INPUT, "%s: not a regular file", path);
	return fd;
}

void
jsonl_cat(const char *path, int out) {
	struct stat st;
	struct src in = {.path = path, .fd = open_input(path, &st)};
	size_t cap = 1 << 20;
	char *buf = xmalloc(cap);
	for (;;) {
		ssize_t r = src_read(&in, buf, cap, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
		if (!r)
			break;
		if (write_all(out, buf, (size_t)r))
			die(EXIT_BAD_INPUT, "writing: %s", strerror(errno));
	}
	src_close(&in);
	free(buf);
}

/* Lines are read with read(2) into one reused buffer (a private writable
 * mapping would take a copy-on-write fault per page the parser writes,
 * which costs more than the copy) and parsed in place. */
static void
load_file(struct mfile *f, const char *path) {
	memset(f, 0, sizeof *f);
	f->path = xstrdup(path);
	f->rank = f->pid = -1;
	f->cur_idx = -1;
	struct stat st;
	int fd = open_input(path, &st);
	if (!st.st_size)
		die(EXIT_BAD_INPUT, "%s: empty file (no header record)", path);
	size_t cap = 8 << 20, have = 0;
	char *buf = xmalloc(cap + 1);
	struct src in = {.path = path, .fd = fd};
	struct jdoc d = {0};
	struct ctx c = {f, &d, 0};
	int eof = 0;
	while (!eof || have) {
		if (!eof && have < cap) {
			ssize_t r = src_read(&in, buf + have, cap - have, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
			eof = r == 0;
			have += (size_t)r;
		}
		have = whole_lines(&c, buf, have, NULL);
		if (eof && have) { /* a last line without a newline */
			c.line++;
			if (record(&c, buf, have, 1))
				f->truncated = 1;
			have = 0;
		} else if (have == cap) { /* a line longer than the buffer */
			cap *= 2;
			buf = xrealloc(buf, cap + 1);
		}
	}
	src_close(&in);
	free(buf);
	json_free(&d);
	if (!f->version)
		die(EXIT_BAD_INPUT, "%s:1: not a memtally file (no header record)", path);
}

/* ---- following a file as it grows (memtally top) -------------------- */

struct follow {
	struct mfile f;
	struct jdoc d;
	struct src in;
	int line;
	char *buf;
	size_t cap, have;
};

struct follow *
follow_open(const char *path) {
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return NULL;
	}
	struct follow *w = xcalloc(1, sizeof *w);
	w->f.path = xstrdup(path);
	w->f.rank = w->f.pid = -1;
	w->f.cur_idx = -1;
	w->in.fd = fd;
	w->in.path = w->f.path;
	w->cap = 1 << 20;
	w->buf = xmalloc(w->cap + 1);
	return w;
}

struct mfile *
follow_file(struct follow *w) {
	return &w->f;
}

/* Whole lines only: a line still being written (no newline yet) waits in
 * the buffer for the rest; at most `budget` bytes are read a call, so one
 * huge file does not hold up a refresh for long.  Reads only what was
 * appended since the last call: never the whole file again. */
long
follow_poll(struct follow *w, size_t budget) {
	struct ctx c = {&w->f, &w->d, w->line};
	long lines = 0;
	size_t got = 0;
	while (got < budget) {
		if (w->have == w->cap) { /* a line longer than the buffer */
			w->cap *= 2;
			w->buf = xrealloc(w->buf, w->cap + 1);
		}
		uint64_t raw0 = w->in.raw;
		ssize_t r = src_read(&w->in, w->buf + w->have, w->cap - w->have, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)(w->in.raw - raw0);
		w->have += (size_t)r;
		w->have = whole_lines(&c, w->buf, w->have, &lines);
	}
	w->line = c.line;
	return lines;
}

uint64_t
follow_pending(struct follow *w, uint64_t *size) {
	struct stat st;
	uint64_t n = !fstat(w->in.fd, &st) ? (uint64_t)st.st_size : w->in.raw;
	if (size)
		*size = n;
	return n > w->in.raw ? n - w->in.raw : 0;
}

void
follow_close(struct follow *w) {
	src_close(&w->in);
	free(w->buf);
	json_free(&w->d);
	free(w);
}

static int
cmp_str(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *
jsonl_ext(const char *name) {
	size_t n = strlen(name);
	if (n > 6 && !strcmp(name + n - 6, ".jsonl"))
		return name + n - 6;
	if (n > 10 && !strcmp(name + n - 10, ".jsonl.zst"))
		return name + n - 10;
	return NULL;
}

static int
is_snapshot_file(const char *name, int dumps) {
	size_t n = strlen(name);
	if (n > 12 && !strcmp(name + n - 12, ".torch.jsonl"))
		return 0; /* PyTorch's snapshot beside a dump (read/torchsnap.c) */
	return !strncmp(name, "memtally.", 9) && jsonl_ext(name) &&
	       (strstr(name, ".oom") != NULL) == dumps;
}

static void load_paths(struct run *r, char **paths, int npaths, int dumps, int optional);

void
run_load(struct run *r, char **paths, int npaths) {
	load_paths(r, paths, npaths, 0, 0);
}

void
run_load_dumps(struct run *r, char **paths, int npaths) {
	load_paths(r, paths, npaths, 1, 0);
}

void
run_load_dumps_if_any(struct run *r, char **paths, int npaths) {
	load_paths(r, paths, npaths, 1, 1);
}

/* FILE@N, FILE@peak, FILE@last (a snapshot of a file or of every file
 * of a directory) where FILE exists and FILE@... does not: the snapshot
 * goes to *sel and the path is cut there (in place).  Else SNAP_DEFAULT. */
long
path_selector(char *path) {
	char *at = strrchr(path, '@');
	struct stat st;
	if (!at || at == path || !stat(path, &st))
		return SNAP_DEFAULT;
	const char *v = at + 1;
	long sel;
	if (!strcmp(v, "peak"))
		sel = SNAP_PEAK;
	else if (!strcmp(v, "last"))
		sel = SNAP_LAST;
	else if (*v && strspn(v, "0123456789") == strlen(v) && strlen(v) < 16)
		sel = atol(v);
	else
		die(EXIT_BAD_INPUT, "%s: no such file, and '@%s' is not a snapshot (N, peak or last)",
		    path, v);
	*at = 0;
	if (stat(path, &st)) {
		int e = errno;
		*at = '@';
		die(EXIT_BAD_INPUT, "%s: %s", path, strerror(e));
	}
	return sel;
}

static void
load_paths(struct run *r, char **paths, int npaths, int dumps, int optional) {
	char **list = NULL;
	long *sels = NULL;
	size_t n = 0, cap = 0, scap = 0;
	for (int i = 0; i < npaths; i++) {
		struct stat st;
		char *path = xstrdup(paths[i]); /* cut at FILE@N's '@' */
		long sel = path_selector(path);
		if (stat(path, &st))
			die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
		if (!S_ISDIR(st.st_mode)) {
			if (optional && !strstr(path, ".oom")) {
				free(path);
				continue; /* a snapshot file named among dumps */
			}
			list = xgrow(list, n + 1, &cap, sizeof *list);
			sels = xgrow(sels, n + 1, &scap, sizeof *sels);
			sels[n] = sel;
			list[n++] = path;
			continue;
		}
		DIR *d = opendir(path);
		if (!d)
			die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
		size_t before = n;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!is_snapshot_file(e->d_name, dumps))
				continue;
			struct sb s = {0};
			sb_printf(&s, "%s/%s", path, e->d_name);
			struct stat fst;
			if (!stat(s.p, &fst) && fst.st_size == 0) {
				/* a process that exec'd or died before its
				 * first line: nothing to read (named alone, an
				 * empty file is an error) */
				warnx("%s: empty, skipped", s.p);
				sb_free(&s);
				continue;
			}
			list = xgrow(list, n + 1, &cap, sizeof *list);
			sels = xgrow(sels, n + 1, &scap, sizeof *sels);
			sels[n] = sel;
			list[n++] = s.p;
		}
		closedir(d);
		if (n == before && !optional)
			die(EXIT_BAD_INPUT, dumps ? "%s: no OOM dumps (memtally.*.oom*.jsonl) in this directory"
						  : "%s: no memtally.*.jsonl[.zst] files in this directory",
			    path);
		xqsort(list + before, n - before, sizeof *list, cmp_str);
		free(path);
	}
	r->files = xcalloc(n, sizeof *r->files);
	r->nfiles = n;
	for (size_t i = 0; i < n; i++) {
		load_file(&r->files[i], list[i]);
		r->files[i].sel = sels[i];
		r->files[i].has_sel = sels[i] != SNAP_DEFAULT;
		free(list[i]);
	}
	free(list);
	free(sels);
}
