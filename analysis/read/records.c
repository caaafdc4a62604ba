/* records.c — one JSONL line into the model: the record's type picks its
 * parser; this file holds the parsers of the records that name things
 * (header, maps, stacks, Python frames).  The records that hold figures
 * are snaprec.c's; the field access both use is fields.c's.  Unknown
 * record types and fields are ignored (a newer shim's); a field of the
 * wrong type or out of range is refused with bad(), before the model
 * changes. */
#include "read/reader.h"
#include "read/idmap.h"
#include "base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
header(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int64_t v = need_int(c, o, MT_F_VERSION);
	if (v > MT_FORMAT_VERSION || v < 1)
		bad(c, "format version %lld; this memtally reads versions 1 to %d", (long long)v,
		    MT_FORMAT_VERSION);
	int64_t pid = need_count(c, o, MT_F_PID), ppid = opt_count(c, o, MT_F_PPID, -1, INT32_MAX),
		rank = opt_count(c, o, MT_F_RANK, -1, INT32_MAX),
		local = opt_count(c, o, MT_F_LOCAL_RANK, -1, INT32_MAX),
		world = opt_count(c, o, MT_F_WORLD_SIZE, -1, INT32_MAX),
		start = opt_count(c, o, MT_F_START_WALL_NS, -1, RD_MAX_NS),
		sample = opt_count(c, o, MT_F_SAMPLE_BYTES, -1, INT64_MAX);
	const char *host = str_field(c, o, MT_F_HOST), *exe = str_field(c, o, MT_F_EXE);
	f->version = (int)v;
	f->pid = pid, f->ppid = ppid, f->rank = rank, f->local_rank = local, f->world_size = world;
	f->start_wall_ns = start, f->sample_bytes = sample;
	f->host = host ? xstrdup(host) : NULL;
	f->exe = exe ? xstrdup(exe) : NULL;
	const char *job = str_field(c, o, MT_F_JOB);
	free(f->job);
	f->job = job ? xstrdup(job) : NULL;
	struct sb a = {0};
	struct jv *argv = json_get(c->d, o, MT_F_ARGV);
	if (argv && argv->type == J_ARR)
		for (struct jv *x = json_child(c->d, argv); x; x = json_next(c->d, x))
			if (x->type == J_STR) {
				if (a.len)
					sb_putc(&a, ' ');
				sb_puts(&a, x->s);
			}
	f->argv = a.p ? a.p : xstrdup("");
}

static void
maps(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	struct jv *mods = json_get(c->d, o, MT_F_MODULES);
	if (!mods || mods->type != J_ARR)
		bad(c, "maps record without a \"modules\" array");
	for (struct jv *m = json_child(c->d, mods); m; m = json_next(c->d, m)) { /* check all first */
		if (!str_field(c, m, MT_F_PATH))
			bad(c, "module without a path");
		need_hex(c, m, MT_F_BASE), need_hex(c, m, MT_F_START), need_hex(c, m, MT_F_END);
		if (json_get(c->d, m, MT_F_OFFSET))
			need_hex(c, m, MT_F_OFFSET);
		str_field(c, m, MT_F_BUILD_ID);
	}
	for (struct jv *m = json_child(c->d, mods); m; m = json_next(c->d, m)) {
		struct module mod = {0};
		const char *path = json_str(c->d, m, MT_F_PATH);
		mod.base = need_hex(c, m, MT_F_BASE);
		mod.start = need_hex(c, m, MT_F_START);
		mod.end = need_hex(c, m, MT_F_END);
		if (json_get(c->d, m, MT_F_OFFSET))
			mod.offset = need_hex(c, m, MT_F_OFFSET);
		size_t *slot = mod_slot(f, mod.start, mod.end, path); /* keep each once */
		if (*slot)
			continue;
		mod.path = xstrdup(path);
		const char *bid = json_str(c->d, m, MT_F_BUILD_ID);
		mod.build_id = bid ? xstrdup(bid) : NULL;
		f->mods = xgrow(f->mods, f->nmods + 1, &f->cap_mods, sizeof *f->mods);
		f->mods[f->nmods++] = mod;
		*slot = f->nmods;
	}
	file_index_modules(f);
}

/* A stack's "py": its pystack index, 0 for none, -1 when absent. */
static int64_t
stack_py(struct ctx *c, struct jv *o, int64_t id) {
	struct mfile *f = c->f;
	struct jv *py = json_get(c->d, o, MT_F_PY);
	if (!py || py->type == J_NULL)
		return -1;
	if (py->type != J_NUM || !py->is_int || py->i < 0)
		bad(c, "stack %lld: \"py\" is not a pystack id", (long long)id);
	if (!py->i)
		return 0;
	uint32_t p = idmap_get(&f->pystackmap, py->i);
	if (!p || !f->pystacks[p].frames)
		bad(c, "stack %lld refers to pystack %lld, which has no record before it", (long long)id,
		    (long long)py->i);
	return p;
}

/* Format 3: "up" and "keep" say a stack's outer frames are the outermost
 * keep frames of an earlier stack record: that stack, or NULL. */
static const struct stack *
stack_up(struct ctx *c, struct jv *o, int64_t id, int64_t *keep) {
	struct mfile *f = c->f;
	int64_t up = opt_i64(c, o, MT_F_UP, -1);
	*keep = 0;
	if (up == -1)
		return NULL;
	uint32_t ui = up > 0 ? idmap_get(&f->stackmap, up) : 0;
	if (!ui || !f->stacks[ui].pcs || f->stacks[ui].id == id)
		bad(c, "stack %lld: \"up\" names stack %lld, which has no record before it",
		    (long long)id, (long long)up);
	const struct stack *u = &f->stacks[ui];
	*keep = need_int(c, o, MT_F_KEEP);
	if (*keep < 0 || *keep > u->n)
		bad(c, "stack %lld: \"keep\" is %lld, stack %lld has %d frames", (long long)id,
		    (long long)*keep, (long long)up, u->n);
	return u;
}

/* An id names one thing for the whole file.  The shim writes a record
 * again, as it was, after a failed write (what the file lacks is written
 * again: the same frames); anything else under an id already defined
 * cannot be, and is refused.  1: the record says again what the model
 * holds (nothing to do). */
static int
restated_stack(struct ctx *c, int64_t id, size_t n, int64_t py, int64_t dev) {
	struct mfile *f = c->f;
	uint32_t ix = idmap_get(&f->stackmap, id);
	if (!ix || !f->stacks[ix].pcs)
		return 0;
	const struct stack *s = &f->stacks[ix];
	if ((size_t)s->n != n || (n && memcmp(s->pcs, c->pcs, n * sizeof *c->pcs)) || s->py != py ||
	    s->dev1 != (int)dev + 1)
		bad(c, "stack %lld is defined a second time, with other frames (a stack id names one "
		       "stack)", (long long)id);
	return 1;
}

static void
stack(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int64_t id = need_int(c, o, MT_F_ID), keep;
	if (id < 1 || id > INT32_MAX)
		bad(c, "stack id %lld out of range (1..%d)", (long long)id, INT32_MAX);
	struct jv *pcs = json_get(c->d, o, MT_F_PCS);
	if (!pcs || pcs->type != J_ARR)
		bad(c, "stack record without a \"pcs\" array");
	int64_t py = stack_py(c, o, id);
	int64_t dev = opt_i64(c, o, MT_F_DEVICE, -1);
	if (dev < -1 || dev >= MT_MAX_DEVICE)
		bad(c, "stack %lld: \"device\" is %lld, not a CUDA device (0..%d)", (long long)id,
		    (long long)dev, MT_MAX_DEVICE - 1);
	const struct stack *u = stack_up(c, o, id, &keep);
	/* A shared stack is no deeper than the shim captures, so a line of
	 * a few bytes cannot stand for more than MT_MAX_DEPTH frames. */
	if (u && pcs->len + (size_t)keep > MT_MAX_DEPTH)
		bad(c, "stack %lld has %zu frames; a stack with \"up\" has at most %d", (long long)id,
		    pcs->len + (size_t)keep, MT_MAX_DEPTH);
	size_t n = pcs->len + (size_t)keep, i = 0;
	c->pcs = xgrow(c->pcs, n + 1, &c->cap_pcs, sizeof *c->pcs);
	for (struct jv *x = json_child(c->d, pcs); x; x = json_next(c->d, x))
		if (!json_hex(x, &c->pcs[i++]))
			bad(c, "stack %lld: a pc is not a \"0x...\" address", (long long)id);
	if (keep)
		memcpy(c->pcs + i, u->pcs + (u->n - keep), (size_t)keep * sizeof *c->pcs);
	if (restated_stack(c, id, n, py, dev))
		return;
	/* checked: into the model (u may move as the table grows) */
	uint32_t ix = idmap_slot(&f->stackmap, (void **)&f->stacks, &f->nstacks, &f->cap_stacks,
				 sizeof *f->stacks, id);
	struct stack *s = &f->stacks[ix];
	/* the frames it takes from "up" are not counted against the bound
	 * (reader.h): a real trainer's deep stacks share long prefixes, and
	 * refusing them would refuse the shim's own files; what one record
	 * can stand for is bounded by MT_MAX_DEPTH instead.  32: its ids in
	 * the map. */
	c->held += sizeof *s + (n - (size_t)keep) * sizeof *s->pcs + 32;
	free(s->pcs);
	s->pcs = xmalloc(n * sizeof *s->pcs + 1);
	if (n)
		memcpy(s->pcs, c->pcs, n * sizeof *s->pcs);
	s->n = (int)n;
	s->id = id;
	s->py = py;
	s->dev1 = (int)dev + 1;
}

static void
pyframe(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int64_t id = need_int(c, o, MT_F_ID);
	if (id < 1 || id > INT32_MAX)
		bad(c, "pyframe id %lld out of range (1..%d)", (long long)id, INT32_MAX);
	const char *file = str_field(c, o, MT_F_FILE), *func = str_field(c, o, MT_F_FUNC);
	if (!file || !func)
		bad(c, "pyframe %lld without \"file\" and \"func\" strings", (long long)id);
	int64_t line = need_int(c, o, MT_F_LINE);
	if (line < INT32_MIN || line > INT32_MAX)
		bad(c, "pyframe %lld: line %lld out of range", (long long)id, (long long)line);
	uint32_t was = idmap_get(&f->pyframemap, id);
	if (was && f->pyframes[was].file) { /* said again (restated_stack) */
		const struct pyframe *q = &f->pyframes[was];
		if (strcmp(q->file, file) || strcmp(q->func, func) || q->line != (int)line)
			bad(c, "pyframe %lld is defined a second time, as another frame", (long long)id);
		return;
	}
	uint32_t ix = idmap_slot(&f->pyframemap, (void **)&f->pyframes, &f->npyframes,
				 &f->cap_pyframes, sizeof *f->pyframes, id);
	struct pyframe *p = &f->pyframes[ix];
	free(p->file);
	free(p->func);
	p->file = xstrdup(file);
	p->func = xstrdup(func);
	p->line = (int)line;
}

/* A pystack said again: as it was (1), or refused (restated_stack). */
static int
restated_pystack(struct ctx *c, struct jv *o, int64_t id, struct jv *fr, struct jv *en) {
	struct mfile *f = c->f;
	uint32_t ix = idmap_get(&f->pystackmap, id);
	if (!ix || !f->pystacks[ix].frames)
		return 0;
	const struct pystack *p = &f->pystacks[ix];
	int same = (size_t)p->n == fr->len && p->truncated == flag(c, o, MT_F_TRUNCATED), i = 0;
	for (struct jv *x = json_child(c->d, fr); same && x; x = json_next(c->d, x), i++)
		same = p->frames[i] == idmap_get(&f->pyframemap, x->i);
	i = 0;
	for (struct jv *x = json_child(c->d, en); same && x; x = json_next(c->d, x), i++)
		same = p->entry[i] == (x->type == J_NUM && x->i);
	if (!same)
		bad(c, "pystack %lld is defined a second time, with other frames", (long long)id);
	return 1;
}

static void
pystack(struct ctx *c, struct jv *o) {
	struct mfile *f = c->f;
	int64_t id = need_int(c, o, MT_F_ID);
	if (id < 1 || id > INT32_MAX)
		bad(c, "pystack id %lld out of range (1..%d)", (long long)id, INT32_MAX);
	struct jv *fr = json_get(c->d, o, MT_F_FRAMES), *en = json_get(c->d, o, MT_F_ENTRY);
	if (!fr || fr->type != J_ARR || !en || en->type != J_ARR || en->len != fr->len)
		bad(c, "pystack %lld: \"frames\" and \"entry\" must be arrays of one length",
		    (long long)id);
	int i = 0;
	for (struct jv *x = json_child(c->d, fr); x; x = json_next(c->d, x), i++) {
		uint32_t fx = x->type == J_NUM && x->i > 0 ? idmap_get(&f->pyframemap, x->i) : 0;
		if (!fx || !f->pyframes[fx].file)
			bad(c, "pystack %lld: frame %d is not a pyframe written before it",
			    (long long)id, i);
	}
	if (restated_pystack(c, o, id, fr, en))
		return;
	uint32_t ix = idmap_slot(&f->pystackmap, (void **)&f->pystacks, &f->npystacks,
				 &f->cap_pystacks, sizeof *f->pystacks, id);
	struct pystack *p = &f->pystacks[ix];
	c->held += sizeof *p + fr->len * 5 + 32;
	free(p->frames);
	free(p->entry);
	p->n = (int)fr->len;
	p->frames = xmalloc((size_t)p->n * sizeof *p->frames + 1);
	p->entry = xmalloc((size_t)p->n + 1);
	i = 0;
	for (struct jv *x = json_child(c->d, fr); x; x = json_next(c->d, x), i++)
		p->frames[i] = idmap_get(&f->pyframemap, x->i);
	i = 0;
	for (struct jv *x = json_child(c->d, en); x; x = json_next(c->d, x), i++)
		p->entry[i] = x->type == J_NUM && x->i;
	p->truncated = flag(c, o, MT_F_TRUNCATED);
	/* both ends kept: frames [0, elided_at) innermost, the rest outermost */
	p->elided = opt_count(c, o, MT_F_ELIDED, 0, INT32_MAX);
	p->elided_at = (int)opt_count(c, o, MT_F_ELIDED_AT, 0, p->n);
	if (!p->elided)
		p->elided_at = 0;
}

static void
python(struct ctx *c, struct jv *o) {
	char *v = opt_str(c, o, MT_F_VERSION);
	free(c->f->python);
	c->f->python = v ? v : xstrdup("?");
}

/* --- ids defined twice, in a summary (reader.h: summary_seen) --- */

#define SEEN_PFX "{\"" MT_F_TYPE "\":\""

struct seen {
	struct seen_slot {
		uint64_t key; /* id << 2 | record kind (1..3); 0: empty */
		uint64_t hash;
	} *v;
	size_t cap, n; /* cap: a power of two */
};

static uint64_t
line_hash(const unsigned char *p, size_t n) {
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (; n >= 8; p += 8, n -= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	for (; n; p++, n--)
		h = (h ^ *p) * 0x100000001b3ull;
	return h ^ h >> 29;
}

static struct seen_slot *
seen_slot(struct seen *s, uint64_t key) {
	size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (s->cap - 1);
	while (s->v[i].key && s->v[i].key != key)
		i = (i + 1) & (s->cap - 1);
	return &s->v[i];
}

void
summary_seen(struct ctx *c, const char *p, size_t len) {
	static const struct {
		const char *pfx, *what;
	} kinds[] = {
		{SEEN_PFX MT_R_STACK "\",\"" MT_F_ID "\":",
		 "stack %lld is defined a second time, with other frames (a stack id names one stack)"},
		{SEEN_PFX MT_R_PYFRAME "\",\"" MT_F_ID "\":", "pyframe %lld is defined a second time, as another frame"},
		{SEEN_PFX MT_R_PYSTACK "\",\"" MT_F_ID "\":", "pystack %lld is defined a second time, with other frames"},
	};
	unsigned k = 0;
	size_t n = 0;
	for (; k < 3; k++) {
		n = strlen(kinds[k].pfx);
		if (len > n && !memcmp(p, kinds[k].pfx, n))
			break;
	}
	if (k == 3)
		return;
	uint64_t id = 0;
	size_t i = n;
	for (; i < len && i < n + 10 && p[i] >= '0' && p[i] <= '9'; i++)
		id = id * 10 + (uint64_t)(p[i] - '0');
	if (i == n || id < 1 || id > INT32_MAX)
		return; /* not as the shim writes it: not checked */
	struct seen *s = c->seen;
	if (!s) {
		s = c->seen = xcalloc(1, sizeof *s);
		s->cap = 1024;
		s->v = xcalloc(s->cap, sizeof *s->v);
	}
	if (2 * (s->n + 1) > s->cap) { /* at most half full */
		struct seen t = {xcalloc(2 * s->cap, sizeof *s->v), 2 * s->cap, s->n};
		for (size_t j = 0; j < s->cap; j++)
			if (s->v[j].key)
				*seen_slot(&t, s->v[j].key) = s->v[j];
		free(s->v);
		*s = t;
	}
	uint64_t key = id << 2 | (k + 1), h = line_hash((const unsigned char *)p + i, len - i);
	struct seen_slot *e = seen_slot(s, key);
	if (!e->key) {
		e->key = key;
		e->hash = h;
		s->n++;
	} else if (e->hash != h) {
		bad(c, kinds[k].what, (long long)id);
	}
}

void
summary_seen_free(struct ctx *c) {
	if (c->seen)
		free(c->seen->v);
	free(c->seen);
	c->seen = NULL;
}

void
record(struct ctx *c, char *p, size_t len) {
	const char *err;
	size_t col;
	if (c->summary && c->line > 1 && !summary_keep(p, &len)) {
		summary_seen(c, p, len); /* an id defined again: refused */
		return; /* a stack or other record a summary has no use for */
	}
	struct jv *o = json_parse(c->d, p, len, &err, &col);
	if (!o && c->last) {
		c->cut = 1;
		return;
	}
	if (!o)
		bad(c, "%s (column %zu)", err, col + 1);
	if (o->type != J_OBJ)
		bad(c, "a record must be a JSON object");
	const char *type = json_str(c->d, o, MT_F_TYPE);
	if (!type)
		bad(c, "record without a \"type\"");
	int is_header = !strcmp(type, MT_R_HEADER);
	if (c->line == 1 && !is_header)
		bad(c, "not a memtally file: the first record is \"%s\", not a header", type);
	if (is_header && c->line != 1)
		bad(c, "a second header record");
	static const struct {
		const char *type;
		void (*fn)(struct ctx *, struct jv *);
	} parsers[] = {
		{MT_R_HEADER, header},     {MT_R_MAPS, maps},       {MT_R_STACK, stack},
		{MT_R_PYFRAME, pyframe},   {MT_R_PYSTACK, pystack}, {MT_R_PYTHON, python},
		{MT_R_SNAPSHOT, rec_snapshot}, {MT_R_OOM, rec_oom}, {MT_R_OUTCOME, rec_outcome},
		{MT_R_SEGMENT, rec_segment},
		{MT_R_TRACE, rec_trace},   {MT_R_KEPT, rec_kept}, {MT_R_SEARCHED, rec_searched},
	};
	for (size_t i = 0; i < sizeof parsers / sizeof *parsers; i++)
		if (!strcmp(type, parsers[i].type)) {
			parsers[i].fn(c, o);
			return;
		}
	/* other types: ignored (readers of newer files) */
}
