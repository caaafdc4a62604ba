/* torchsnap.c — reading PyTorch's snapshot beside an OOM dump
 * (torchsnap.h).  Records refer only to records before them; ids are the
 * records' order (1, 2, ... for each of tframe, tstack, tsegment), so a
 * reader keeps arrays, never a map; anything else is refused, naming the
 * line. */
#include "read/torchsnap.h"
#include "read/json.h"
#include "read/source.h"
#include "base/util.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINE (64u << 20) /* a line longer than this is refused */

struct tctx {
	struct tsnap *t;
	struct jdoc d;
	long line;
};

static void __attribute__((noreturn, format(printf, 2, 3)))
tbad(struct tctx *c, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	die(EXIT_BAD_INPUT, "%s:%ld: %s", c->t->path, c->line, msg);
}

static int64_t
need_int(struct tctx *c, struct jv *o, const char *key, int64_t lo, int64_t hi) {
	struct jv *v = json_get(&c->d, o, key);
	if (!v || v->type != J_NUM || !v->is_int)
		tbad(c, "\"%s\": an integer is needed", key);
	if (v->i < lo || v->i > hi)
		tbad(c, "\"%s\": %lld is out of range", key, (long long)v->i);
	return v->i;
}

static uint64_t
need_hex(struct tctx *c, struct jv *o, const char *key) {
	struct jv *v = json_get(&c->d, o, key);
	uint64_t a;
	if (!v || !json_hex(v, &a))
		tbad(c, "\"%s\": an address \"0x...\" is needed", key);
	return a;
}

static uint32_t
stack_ref(struct tctx *c, struct jv *o) {
	int64_t s = need_int(c, o, "stack", 0, INT32_MAX);
	if ((size_t)s > c->t->nstacks)
		tbad(c, "stack %lld used before its tstack record", (long long)s);
	return (uint32_t)s;
}

static int
block_state(const char *s) {
	if (!strcmp(s, "active_allocated"))
		return TB_ALLOCATED;
	if (!strcmp(s, "inactive"))
		return TB_INACTIVE;
	return TB_PENDING; /* active_pending_free, active_awaiting_free, ... */
}

/* The first record: the file's version and the OOM observer's arguments. */
static void
rec_torch(struct tctx *c, struct jv *o) {
	struct tsnap *t = c->t;
	if (c->line != 1)
		tbad(c, "a second torch record");
	if (need_int(c, o, "version", 1, INT32_MAX) != 1)
		tbad(c, "version %lld: this memtally reads version 1",
		     (long long)json_int(&c->d, o, "version", 0));
	const char *v = json_str(&c->d, o, "torch");
	snprintf(t->torch, sizeof t->torch, "%s", v ? v : "?");
	t->device = need_int(c, o, "device", 0, 255);
	t->size = json_int(&c->d, o, "size", -1);
	t->limit = json_int(&c->d, o, "limit", -1);
	t->free_bytes = json_int(&c->d, o, "free", -1);
	t->history = json_int(&c->d, o, "history", -1);
}

static void
rec_tframe(struct tctx *c, struct jv *o) {
	struct tsnap *t = c->t;
	if (need_int(c, o, "id", 1, INT32_MAX) != (int64_t)t->nframes)
		tbad(c, "tframe ids go 1, 2, ... in order");
	const char *file = json_str(&c->d, o, "file"), *name = json_str(&c->d, o, "name");
	t->frames = xgrow(t->frames, t->nframes + 1, &t->cap_frames, sizeof *t->frames);
	t->frames[t->nframes++] = (struct tframe){xstrdup(file ? file : "?"), xstrdup(name ? name : "?"),
						  (int)need_int(c, o, "line", -1, INT32_MAX)};
}

static void
rec_tstack(struct tctx *c, struct jv *o) {
	struct tsnap *t = c->t;
	if (need_int(c, o, "id", 1, INT32_MAX) != (int64_t)t->nstacks)
		tbad(c, "tstack ids go 1, 2, ... in order");
	struct jv *fr = json_get(&c->d, o, "frames");
	if (!fr || fr->type != J_ARR || fr->len > 4096)
		tbad(c, "tstack: \"frames\" must be a list of at most 4096 tframe ids");
	struct tstack s = {xmalloc((fr->len ? fr->len : 1) * sizeof *s.frames), 0};
	for (struct jv *x = json_child(&c->d, fr); x; x = json_next(&c->d, x)) {
		if (x->type != J_NUM || !x->is_int || x->i < 1 || (size_t)x->i >= t->nframes)
			tbad(c, "tstack: frame %lld is not an earlier tframe", (long long)x->i);
		s.frames[s.n++] = (uint32_t)x->i;
	}
	t->stacks = xgrow(t->stacks, t->nstacks + 1, &t->cap_stacks, sizeof *t->stacks);
	t->stacks[t->nstacks++] = s;
}

static void
rec_tsegment(struct tctx *c, struct jv *o) {
	struct tsnap *t = c->t;
	if (need_int(c, o, "id", 1, INT32_MAX) != (int64_t)t->nsegs)
		tbad(c, "tsegment ids go 1, 2, ... in order");
	struct tseg s = {.device = (int)need_int(c, o, "device", 0, 255),
			 .addr = need_hex(c, o, "address"),
			 .size = (uint64_t)need_int(c, o, "total_size", 0, INT64_MAX),
			 .stream = json_int(&c->d, o, "stream", 0),
			 .stack = stack_ref(c, o),
			 .block0 = t->nblocks};
	struct jv *e = json_get(&c->d, o, "is_expandable");
	s.expandable = e && e->type == J_TRUE;
	const char *ty = json_str(&c->d, o, "segment_type");
	snprintf(s.type, sizeof s.type, "%s", ty ? ty : "");
	if (s.addr + s.size < s.addr)
		tbad(c, "tsegment: address + total_size passes 2^64");
	t->segs = xgrow(t->segs, t->nsegs + 1, &t->cap_segs, sizeof *t->segs);
	t->segs[t->nsegs++] = s;
}

/* A block, right after its segment's record or another block of it. */
static void
rec_tblock(struct tctx *c, struct jv *o) {
	struct tsnap *t = c->t;
	int64_t sg = need_int(c, o, "segment", 1, INT32_MAX);
	if ((size_t)sg != t->nsegs - 1)
		tbad(c, "tblock: blocks follow their segment (segment %lld)", (long long)sg);
	struct tseg *s = &t->segs[sg];
	const char *st = json_str(&c->d, o, "state");
	struct tblock b = {.addr = need_hex(c, o, "address"),
			   .size = (uint64_t)need_int(c, o, "size", 0, INT64_MAX),
			   .requested = (uint64_t)need_int(c, o, "requested_size", 0, INT64_MAX),
			   .state = block_state(st ? st : ""),
			   .stack = stack_ref(c, o),
			   .seg = (uint32_t)sg};
	if (b.addr < s->addr || b.addr + b.size < b.addr || b.addr + b.size > s->addr + s->size)
		tbad(c, "tblock: 0x%llx + %llu lies outside its segment", (unsigned long long)b.addr,
		     (unsigned long long)b.size);
	t->blocks = xgrow(t->blocks, t->nblocks + 1, &t->cap_blocks, sizeof *t->blocks);
	t->blocks[t->nblocks++] = b;
	s->nblocks++;
}

static void
rec_ttrace(struct tctx *c, struct jv *o) {
	struct tsnap *t = c->t;
	struct ttrace e = {.device = (int)need_int(c, o, "device", 0, 255),
			   .size = (uint64_t)json_int(&c->d, o, "size", 0),
			   .stream = json_int(&c->d, o, "stream", 0),
			   .time_us = json_int(&c->d, o, "time_us", 0),
			   .device_free = json_int(&c->d, o, "device_free", -1),
			   .stack = stack_ref(c, o)};
	const char *a = json_str(&c->d, o, "action");
	snprintf(e.action, sizeof e.action, "%s", a ? a : "?");
	struct jv *ad = json_get(&c->d, o, "addr");
	if (ad && !json_hex(ad, &e.addr))
		tbad(c, "ttrace: \"addr\" must be \"0x...\"");
	t->traces = xgrow(t->traces, t->ntraces + 1, &t->cap_traces, sizeof *t->traces);
	t->traces[t->ntraces++] = e;
}

/* The reader of each record type; other types are ignored (readers of
 * newer files). */
static const struct {
	const char *type;
	void (*read)(struct tctx *c, struct jv *o);
} readers[] = {
	{"torch", rec_torch},       {"tframe", rec_tframe}, {"tstack", rec_tstack},
	{"tsegment", rec_tsegment}, {"tblock", rec_tblock}, {"ttrace", rec_ttrace},
};

static void
record(struct tctx *c, struct jv *o) {
	const char *type = json_str(&c->d, o, "type");
	if (!type)
		tbad(c, "record without a \"type\"");
	if (c->line == 1 && strcmp(type, "torch"))
		tbad(c, "not PyTorch's snapshot: the first record is \"%s\", not \"torch\"", type);
	for (size_t k = 0; k < sizeof readers / sizeof *readers; k++)
		if (!strcmp(type, readers[k].type)) {
			readers[k].read(c, o);
			return;
		}
}

struct tsnap *
tsnap_load(const char *path) {
	struct stat st;
	int fd = open_input(path, &st); /* a regular file, or exit 1: never blocks */
	FILE *fp = fdopen(fd, "r");
	if (!fp)
		die(EXIT_BAD_INPUT, "%s: %s", path, strerror(errno));
	struct tsnap *t = xcalloc(1, sizeof *t);
	t->path = xstrdup(path);
	/* index 0 of each table stands for "none" */
	t->nframes = t->nstacks = t->nsegs = 1;
	t->frames = xgrow(NULL, 1, &t->cap_frames, sizeof *t->frames);
	t->stacks = xgrow(NULL, 1, &t->cap_stacks, sizeof *t->stacks);
	t->segs = xgrow(NULL, 1, &t->cap_segs, sizeof *t->segs);
	memset(t->frames, 0, sizeof *t->frames);
	memset(t->stacks, 0, sizeof *t->stacks);
	memset(t->segs, 0, sizeof *t->segs);
	struct tctx c = {.t = t};
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, fp)) >= 0) {
		c.line++;
		if ((size_t)n > MAX_LINE)
			tbad(&c, "a line of %zd bytes (more than %u)", n, MAX_LINE);
		int whole = n > 0 && line[n - 1] == '\n';
		if (whole)
			line[--n] = 0;
		if (!n)
			continue;
		const char *err;
		size_t col;
		struct jv *o = json_parse(&c.d, line, (size_t)n, &err, &col);
		if (!o) {
			if (!whole)
				break; /* a last line cut short */
			tbad(&c, "%s (column %zu)", err, col + 1);
		}
		if (o->type != J_OBJ)
			tbad(&c, "a record must be a JSON object");
		record(&c, o);
	}
	free(line);
	fclose(fp);
	json_free(&c.d);
	if (!c.line)
		die(EXIT_BAD_INPUT, "%s: empty, not PyTorch's snapshot", path);
	return t;
}

struct tsnap *
tsnap_for_dump(const struct mfile *f) {
	if (!f->oom)
		return NULL;
	const char *slash = strrchr(f->path, '/');
	size_t dir = slash ? (size_t)(slash - f->path) + 1 : 0;
	struct sb p = {0};
	if (f->oom->torch_snapshot[0]) {
		sb_puts_n(&p, f->path, dir);
		sb_puts(&p, f->oom->torch_snapshot);
	} else {
		size_t n = strlen(f->path);
		if (n > 6 && !strcmp(f->path + n - 6, ".jsonl"))
			n -= 6;
		sb_puts_n(&p, f->path, n);
		sb_puts(&p, ".torch.jsonl");
	}
	/* absent: none; anything else there (a FIFO the record names, a
	 * directory) is read by tsnap_load, which refuses what is not a
	 * regular file, naming it (exit 1) */
	struct stat st;
	struct tsnap *t = NULL;
	if (!stat(p.p, &st))
		t = tsnap_load(p.p);
	sb_free(&p);
	return t;
}

void
tsnap_free(struct tsnap *t) {
	if (!t)
		return;
	for (size_t i = 1; i < t->nframes; i++)
		free(t->frames[i].file), free(t->frames[i].name);
	for (size_t i = 1; i < t->nstacks; i++)
		free(t->stacks[i].frames);
	free(t->frames), free(t->stacks), free(t->segs), free(t->blocks), free(t->traces);
	free(t->path);
	free(t);
}

const char *
tsnap_line(const struct tsnap *t, uint32_t stack, char *buf, size_t n) {
	buf[0] = 0;
	if (!stack || stack >= t->nstacks || !t->stacks[stack].n)
		return buf;
	const struct tstack *s = &t->stacks[stack];
	int pick = 0;
	for (int i = 0; i < s->n; i++)
		if (!strstr(t->frames[s->frames[i]].file, "/torch/")) {
			pick = i;
			break;
		}
	const struct tframe *fr = &t->frames[s->frames[pick]];
	const char *base = strrchr(fr->file, '/');
	snprintf(buf, n, "%s:%d %s", base ? base + 1 : fr->file, fr->line, fr->name);
	return buf;
}
