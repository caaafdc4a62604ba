/* pprof.c — `memtally pprof`: a snapshot's call sites as a gzipped
 * profile.proto (analysis/profile.proto), the format jemalloc, tcmalloc
 * and Go write and `go tool pprof`, speedscope and the profiling back ends
 * read.  Encoded with protobuf-c, compressed with zlib.
 *
 *   sample types: alloc_objects/count, alloc_space/bytes,
 *                 inuse_objects/count, inuse_space/bytes (the default)
 *   a sample per call site and kind, its stack leaf first, starting at
 *   the frame `report` names the site by (the allocator's, the runtime's
 *   and, in Python, the interpreter's frames under the innermost Python
 *   frame are left out; --native: native frames only), labelled kind,
 *   pid, rank, host;
 *   a location per return address (inlined frames as several lines,
 *   innermost first) with its module's mapping (file, build id, ranges),
 *   so pprof can symbolize again where memtally could not; Python frames
 *   are locations without a mapping, one line each (function, file, line).
 *
 * At the peak (the default) the four types are still there: alloc_objects
 * and alloc_space are each site's cumulative figures up to the snapshot
 * that carries the peak's figures, inuse_space its bytes at the peak, and
 * inuse_objects its count then: exact where the site's bytes did not
 * change since (the snapshot's live_count), else its bytes at the peak
 * over its mean allocation size (a comment in the profile says so).
 *
 * -o FILE is the file written.  A directory of several processes gives one
 * profile whose samples carry each process's labels (pid, rank, host), or
 * with --each one profile per process (FILE with the process's label
 * inserted: out.pb.gz -> out.<label>.pb.gz). */
#include "cmd/cmd.h"
#include "answer/answer.h"
#include "export/proto/profile.pb-c.h"
#include "answer/sites.h"
#include "read/symbolize.h"
#include "base/util.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct prof {
	Perftools__Profiles__Profile p;
	size_t cap_str, cap_samp, cap_map, cap_loc, cap_fn;
	struct keyix strs, fns, locs, maps;
};

/* The string's index in the string table (profile.proto: index 0 is ""). */
static int64_t
str_ix(struct prof *P, const char *s) {
	if (!s || !*s)
		return 0;
	int fresh;
	uint64_t *v = keyix_slot(&P->strs, s, strlen(s), &fresh);
	if (fresh) {
		P->p.string_table =
			xgrow(P->p.string_table, P->p.n_string_table + 1, &P->cap_str, sizeof(char *));
		P->p.string_table[P->p.n_string_table] = xstrdup(s);
		*v = P->p.n_string_table++;
	}
	return (int64_t)*v;
}

static void
prof_init(struct prof *P) {
	memset(P, 0, sizeof *P);
	perftools__profiles__profile__init(&P->p);
	P->p.string_table = xgrow(NULL, 1, &P->cap_str, sizeof(char *));
	P->p.string_table[0] = xstrdup("");
	P->p.n_string_table = 1;
	/* a Go heap profile's four types, at the peak as at a snapshot */
	static const char *const types[4][2] = {{"alloc_objects", "count"}, {"alloc_space", "bytes"},
						{"inuse_objects", "count"}, {"inuse_space", "bytes"}};
	P->p.n_sample_type = 4;
	P->p.sample_type = xcalloc(4, sizeof *P->p.sample_type);
	for (int i = 0; i < 4; i++) {
		Perftools__Profiles__ValueType *vt = xmalloc(sizeof *vt);
		perftools__profiles__value_type__init(vt);
		vt->type = str_ix(P, types[i][0]);
		vt->unit = str_ix(P, types[i][1]);
		P->p.sample_type[i] = vt;
	}
	P->p.default_sample_type = str_ix(P, "inuse_space");
	P->p.period_type = xmalloc(sizeof *P->p.period_type);
	perftools__profiles__value_type__init(P->p.period_type);
	P->p.period_type->type = str_ix(P, "space");
	P->p.period_type->unit = str_ix(P, "bytes");
}

static void
comment(struct prof *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
comment(struct prof *P, const char *fmt, ...) {
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	size_t cap = P->p.n_comment;
	P->p.comment = xrealloc(P->p.comment, (cap + 1) * sizeof *P->p.comment);
	P->p.comment[P->p.n_comment++] = str_ix(P, buf);
}

/* The mapping of a module of file f (one per file and module). */
static uint64_t
mapping_id(struct prof *P, const struct mfile *f, const struct module *m, int symbolized) {
	char key[64];
	int n = snprintf(key, sizeof key, "%p/%p", (const void *)f, (const void *)m);
	int fresh;
	uint64_t *v = keyix_slot(&P->maps, key, (size_t)n, &fresh);
	if (fresh) {
		Perftools__Profiles__Mapping *mp = xmalloc(sizeof *mp);
		perftools__profiles__mapping__init(mp);
		mp->id = P->p.n_mapping + 1;
		mp->memory_start = m->start;
		mp->memory_limit = m->end;
		mp->file_offset = m->offset;
		mp->filename = str_ix(P, m->path);
		mp->build_id = str_ix(P, m->build_id);
		P->p.mapping = xgrow(P->p.mapping, P->p.n_mapping + 1, &P->cap_map, sizeof *P->p.mapping);
		P->p.mapping[P->p.n_mapping++] = mp;
		*v = mp->id;
	}
	Perftools__Profiles__Mapping *mp = P->p.mapping[*v - 1];
	if (symbolized) /* pprof symbolizes again only mappings without functions */
		mp->has_functions = mp->has_filenames = mp->has_line_numbers =
			mp->has_inline_frames = 1;
	return *v;
}

static uint64_t
function_id(struct prof *P, const char *name, const char *file, int64_t start_line) {
	struct sb k = {0};
	sb_puts(&k, name);
	sb_putc(&k, 0);
	sb_puts(&k, file ? file : "");
	int fresh;
	uint64_t *v = keyix_slot(&P->fns, k.p, k.len, &fresh);
	sb_free(&k);
	if (fresh) {
		Perftools__Profiles__Function *fn = xmalloc(sizeof *fn);
		perftools__profiles__function__init(fn);
		fn->id = P->p.n_function + 1;
		/* system_name stays empty: pprof "demangles" a name equal to
		 * it, which turned Python's "<module>" into "" */
		fn->name = str_ix(P, name);
		fn->filename = str_ix(P, file);
		fn->start_line = start_line;
		P->p.function =
			xgrow(P->p.function, P->p.n_function + 1, &P->cap_fn, sizeof *P->p.function);
		P->p.function[P->p.n_function++] = fn;
		*v = fn->id;
	}
	return *v;
}

static Perftools__Profiles__Line *
new_line(struct prof *P, const struct frame *fr) {
	Perftools__Profiles__Line *l = xmalloc(sizeof *l);
	perftools__profiles__line__init(l);
	l->function_id = function_id(P, fr->func, fr->file, 0);
	l->line = fr->line;
	return l;
}

/* The location of frames fr[0..n) (one return address: an inline chain,
 * innermost first; or one Python frame). */
static uint64_t
location_id(struct prof *P, const struct mfile *f, const struct frame *fr, int n) {
	struct sb k = {0};
	if (fr[0].python)
		sb_printf(&k, "py/%s/%s/%d", fr[0].func ? fr[0].func : "", fr[0].file ? fr[0].file : "",
			  fr[0].line);
	else
		sb_printf(&k, "%p/%llx", (const void *)f, (unsigned long long)fr[0].pc);
	int fresh;
	uint64_t *v = keyix_slot(&P->locs, k.p, k.len, &fresh);
	sb_free(&k);
	if (!fresh)
		return *v;
	Perftools__Profiles__Location *loc = xmalloc(sizeof *loc);
	perftools__profiles__location__init(loc);
	loc->id = P->p.n_location + 1;
	int symbolized = fr[0].status == SYM_OK && fr[0].func;
	if (!fr[0].python && fr[0].mod) {
		loc->mapping_id = mapping_id(P, f, fr[0].mod, symbolized);
		loc->address = fr[0].pc - 1; /* inside the call instruction */
	} else if (!fr[0].python) {
		loc->address = fr[0].pc - 1;
	}
	if (fr[0].python || symbolized) {
		loc->n_line = (size_t)n;
		loc->line = xcalloc((size_t)n, sizeof *loc->line);
		for (int i = 0; i < n; i++)
			loc->line[i] = new_line(P, &fr[i]);
	} else if (fr[0].status == SYM_NOSYM || fr[0].status == SYM_NOMODULE) {
		/* the module is there but has no symbol for it (or there is no
		 * module): named as report names it, "python3.11+0x62d098"; a
		 * module gone or changed since keeps no line, so pprof can
		 * symbolize it again from the user's copy */
		char t[512];
		struct frame named = fr[0];
		named.func = sym_text(&fr[0], t, sizeof t, 0);
		named.file = NULL;
		named.line = 0;
		loc->n_line = 1;
		loc->line = xcalloc(1, sizeof *loc->line);
		loc->line[0] = new_line(P, &named);
	}
	P->p.location = xgrow(P->p.location, P->p.n_location + 1, &P->cap_loc, sizeof *P->p.location);
	P->p.location[P->p.n_location++] = loc;
	*v = loc->id;
	return *v;
}

/* A label: a string, or a number.  A number carries the unit "count":
 * pprof drops a numeric label of 0 without a unit (rank 0 was lost), and
 * "count" is one it scales to nothing, so `-tagfocus rank=0` matches. */
static Perftools__Profiles__Label *
label(struct prof *P, const char *key, const char *str, int64_t num) {
	Perftools__Profiles__Label *l = xmalloc(sizeof *l);
	perftools__profiles__label__init(l);
	l->key = str_ix(P, key);
	if (str) {
		l->str = str_ix(P, str);
	} else {
		l->num = num;
		l->num_unit = str_ix(P, "count");
	}
	return l;
}

/* A site's live count at the peak, its bytes then being t->live_bytes:
 * the snapshot's count where its bytes there are the peak's (nothing
 * changed since), else the bytes over the site's mean allocation size
 * (*estimated set), at least 1 while it holds bytes. */
static int64_t
count_at_peak(const struct site *t, const struct site *now, int *estimated) {
	if (!t->live_bytes)
		return 0;
	if (now && now->live_bytes == t->live_bytes && now->live_count > 0)
		return now->live_count;
	*estimated = 1;
	int64_t c = 1;
	if (t->allocs > 0 && t->alloc_bytes > 0)
		c = (int64_t)((double)t->live_bytes * (double)t->allocs / (double)t->alloc_bytes + 0.5);
	return c > 0 ? c : 1;
}

/* The site of v[0..n) (sorted or not) with t's stack and kind, or NULL. */
static const struct site *
same_site(const struct site *v, size_t n, const struct site *t, size_t *hint) {
	if (*hint < n && v[*hint].stack == t->stack && v[*hint].kind == t->kind)
		return &v[(*hint)++];
	for (size_t i = 0; i < n; i++)
		if (v[i].stack == t->stack && v[i].kind == t->kind) {
			*hint = i + 1;
			return &v[i];
		}
	return NULL;
}

/* Every call site --snapshot asks for of file f as samples. */
static void
add_file(struct prof *P, struct mfile *f, const struct ask *ask, int kind) {
	size_t n, nnow = 0, hint = 0;
	const struct snap *s;
	int at_peak, estimated = 0;
	struct site *v = answer_sites(f, ask, &s, &at_peak, &n);
	/* at the peak: the carrying snapshot's own figures, for the counts */
	struct site *now = at_peak ? snap_sites(f, s, &nnow) : NULL;
	for (size_t i = 0; i < n; i++) {
		const struct site *t = &v[i];
		if (kind >= 0 && t->kind != kind)
			continue;
		if (!t->live_bytes && !t->live_count && !t->allocs && !t->alloc_bytes)
			continue;
		struct frame fr[256];
		int nf = site_frames(f, t->stack, fr, 256);
		int first = nf ? site_first_informative(fr, nf) : 0;
		Perftools__Profiles__Sample *sm = xmalloc(sizeof *sm);
		perftools__profiles__sample__init(sm);
		sm->location_id = xcalloc((size_t)(nf ? nf : 1), sizeof *sm->location_id);
		for (int k = first; k < nf;) {
			int e = k + 1; /* the inline chain of one return address */
			if (!fr[k].python)
				while (e < nf && !fr[e].python && fr[e].pc == fr[k].pc && fr[e - 1].inlined)
					e++;
			sm->location_id[sm->n_location_id++] = location_id(P, f, fr + k, e - k);
			k = e;
		}
		sm->value = xcalloc(4, sizeof *sm->value);
		sm->n_value = 4;
		sm->value[0] = t->allocs;
		sm->value[1] = t->alloc_bytes;
		/* at the peak, live_bytes is the bytes then (sites_for) */
		sm->value[2] = at_peak ? count_at_peak(t, same_site(now, nnow, t, &hint), &estimated)
				       : t->live_count;
		sm->value[3] = t->live_bytes;
		sm->label = xcalloc(4, sizeof *sm->label);
		sm->label[sm->n_label++] = label(P, "kind", kind_names[t->kind], 0);
		sm->label[sm->n_label++] = label(P, "pid", NULL, f->pid);
		if (f->rank >= 0)
			sm->label[sm->n_label++] = label(P, "rank", NULL, f->rank);
		if (f->host)
			sm->label[sm->n_label++] = label(P, "host", f->host, 0);
		P->p.sample = xgrow(P->p.sample, P->p.n_sample + 1, &P->cap_samp, sizeof *P->p.sample);
		P->p.sample[P->p.n_sample++] = sm;
	}
	free(v);
	free(now);
	int64_t t_ns = s->wall_ns ? s->wall_ns : f->start_wall_ns + s->elapsed_ms * 1000000;
	if (!P->p.time_nanos || t_ns < P->p.time_nanos)
		P->p.time_nanos = t_ns;
	if (s->elapsed_ms * 1000000 > P->p.duration_nanos)
		P->p.duration_nanos = s->elapsed_ms * 1000000;
	char lab[128];
	if (at_peak)
		comment(P, "memtally: %s, each call site's live bytes when its kind was at its peak "
			   "(as of snapshot %lld at %.3f s)", file_label(f, lab, sizeof lab),
			(long long)s->seq, (double)s->elapsed_ms / 1000);
	if (at_peak)
		comment(P, "%s: alloc_objects and alloc_space up to snapshot %lld; inuse_objects at the "
			   "peak%s", lab, (long long)s->seq,
			estimated ? ", estimated as the bytes then over a call site's mean allocation "
				    "size where its bytes changed after the peak" : "");
	else
		comment(P, "memtally: %s, snapshot %lld (%s) at %.3f s", file_label(f, lab, sizeof lab),
			(long long)s->seq, s->reason, (double)s->elapsed_ms / 1000);
	if (f->sample_bytes > 0) {
		comment(P, "%s: sampled about every %lld bytes: each value is an unbiased estimate",
			lab, (long long)f->sample_bytes);
		P->p.period = f->sample_bytes;
	}
}

/* Free what prof_init and add_file built (every pointer is ours). */
static void
prof_free(struct prof *P) {
	Perftools__Profiles__Profile *p = &P->p;
	for (size_t i = 0; i < p->n_sample; i++) {
		for (size_t k = 0; k < p->sample[i]->n_label; k++)
			free(p->sample[i]->label[k]);
		free(p->sample[i]->label);
		free(p->sample[i]->location_id);
		free(p->sample[i]->value);
		free(p->sample[i]);
	}
	for (size_t i = 0; i < p->n_location; i++) {
		for (size_t k = 0; k < p->location[i]->n_line; k++)
			free(p->location[i]->line[k]);
		free(p->location[i]->line);
		free(p->location[i]);
	}
	for (size_t i = 0; i < p->n_mapping; i++)
		free(p->mapping[i]);
	for (size_t i = 0; i < p->n_function; i++)
		free(p->function[i]);
	for (size_t i = 0; i < p->n_string_table; i++)
		free(p->string_table[i]);
	for (size_t i = 0; i < p->n_sample_type; i++)
		free(p->sample_type[i]);
	free(p->sample), free(p->location), free(p->mapping), free(p->function);
	free(p->string_table), free(p->sample_type), free(p->period_type), free(p->comment);
	keyix_free(&P->strs), keyix_free(&P->fns), keyix_free(&P->locs), keyix_free(&P->maps);
}

/* Pack, gzip, write (a temporary file renamed over path). */
static void
prof_write(struct prof *P, const char *path) {
	size_t n = perftools__profiles__profile__get_packed_size(&P->p);
	uint8_t *raw = xmalloc(n ? n : 1);
	perftools__profiles__profile__pack(&P->p, raw);
	z_stream z = {0};
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		die(EXIT_BAD_INPUT, "%s: zlib: cannot start compressing", path);
	size_t cap = deflateBound(&z, n);
	uint8_t *gz = xmalloc(cap);
	z.next_in = raw;
	z.avail_in = (uInt)n;
	z.next_out = gz;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		die(EXIT_BAD_INPUT, "%s: zlib: compressing failed", path);
	size_t out = z.total_out;
	deflateEnd(&z);
	write_output(path, gz, out);
	fprintf(stderr, "memtally: wrote %s (%zu samples, %zu locations)\n", path, P->p.n_sample,
		P->p.n_location);
	free(gz);
	free(raw);
}

/* out.pb.gz and a file's label -> out.<label>.pb.gz */
static char *
per_process_name(const char *out, const struct mfile *f) {
	const char *base = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
	size_t bl = strlen(base);
	if (!strncmp(base, "memtally.", 9))
		base += 9, bl -= 9;
	const char *ext = jsonl_ext(base);
	if (ext)
		bl = (size_t)(ext - base);
	size_t ol = strlen(out), stem = ol;
	if (ol > 6 && !strcmp(out + ol - 6, ".pb.gz"))
		stem = ol - 6;
	struct sb s = {0};
	sb_puts_n(&s, out, stem);
	sb_putc(&s, '.');
	sb_puts_n(&s, base, bl);
	sb_puts(&s, out + stem);
	if (stem == ol)
		sb_puts(&s, ".pb.gz");
	return s.p;
}

int
cmd_pprof(struct opts *o) {
	struct run r;
	cmd_load(o, &r);
	/* -o names the file written: every process in it (labelled), unless
	 * --each asks for a file a process */
	if (r.nfiles == 1 || !o->each) {
		struct prof P;
		prof_init(&P);
		for (size_t i = 0; i < r.nfiles; i++)
			add_file(&P, &r.files[i], &o->ask, o->kind);
		comment(&P, "stacks start at the frame memtally names a call site by%s",
			o->native ? " (native frames only)" : "");
		prof_write(&P, o->out);
		prof_free(&P);
		return 0;
	}
	for (size_t i = 0; i < r.nfiles; i++) {
		struct prof P;
		prof_init(&P);
		add_file(&P, &r.files[i], &o->ask, o->kind);
		comment(&P, "stacks start at the frame memtally names a call site by%s",
			o->native ? " (native frames only)" : "");
		char *path = per_process_name(o->out, &r.files[i]);
		prof_write(&P, path);
		free(path);
		prof_free(&P);
	}
	return 0;
}
