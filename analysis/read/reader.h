/* reader.h — inside the reader: what the record parsers (records.c,
 * snaprec.c) share with the line reader (lines.c) that feeds them.  Not
 * for views: they see the model (model/model.h). */
#ifndef MTA_READER_H
#define MTA_READER_H
#include "model/model.h"
#include "read/json.h"
#include "read/source.h"
#include <setjmp.h>

/* Bounds on what a record may say, beyond its type: times since start in
 * ms up to 2^42 (139 years) and wall-clock ns up to 2^62 (the year 2116),
 * so that ms * 10^6 + a wall time still fits an int64 (pprof, torch). */
#define RD_MAX_MS (1ll << 42)
#define RD_MAX_NS (1ll << 62)

/* What a file may make the reader hold: RD_MEM_RATIO times the JSONL read
 * so far, or RD_MEM_FLOOR when that is more (lines.c stops there, as at
 * damage).  The
 * shim's records are larger than what the model keeps of them (a
 * snapshot line, 1.5 KB and more, for 1 KB), and rows that repeat are
 * kept once (snaprec.c); a file of small records that each cost more
 * (bare snapshots of 70 bytes, 1 KB each) is not the shim's, and is
 * refused before it takes the machine.  Not counted: the frames a stack
 * takes from its "up" (records.c; at most MT_MAX_DEPTH a record). */
#define RD_MEM_RATIO 8
#define RD_MEM_FLOOR (16ull << 20)

/* One file being read: its model, the line being parsed, where a bad
 * record goes.  bad() formats "FILE:LINE: reason" into why and jumps to
 * jb: a record is taken whole or not at all (the parsers check before
 * they change the model), so the model stays what the lines before it
 * made; pending is a snapshot being built, freed there. */
struct ctx {
	struct mfile *f;
	struct jdoc *d;
	long line;
	jmp_buf *jb;
	char why[600];
	struct snap *pending;
	uint64_t *pcs;          /* a stack's frames while they are checked */
	size_t cap_pcs;
	uint64_t held;          /* bytes the model holds for the records so far */
	size_t rows_ref;        /* index + 1 of the last snapshot whose rows changed
				 * the call sites (snaprec.c: repeated rows); 0: none */
	int last;               /* the line is the file's last, without a newline */
	int cut;                /* ... and it did not parse: a write cut short */
	int summary;            /* totals and marks only (summary.c): the header
				 * and snapshot records, without call-site rows */
	struct seen *seen;      /* a summary's stack, pyframe and pystack ids,
				 * each with its line's hash (records.c) */
};

__attribute__((noreturn, format(printf, 2, 3))) void bad(struct ctx *c, const char *fmt, ...);

/* Field access that refuses what a record must not say (bad()). */
int64_t need_int(struct ctx *c, struct jv *o, const char *key);   /* an integer */
int64_t need_count(struct ctx *c, struct jv *o, const char *key); /* an integer >= 0 */
/* absent or null: def; else an integer in [0, max] */
int64_t opt_count(struct ctx *c, struct jv *o, const char *key, int64_t def, int64_t max);
/* absent or null: def; else an integer (either sign) */
int64_t opt_i64(struct ctx *c, struct jv *o, const char *key, int64_t def);
char *opt_str(struct ctx *c, struct jv *o, const char *key);      /* a copy, or NULL */
const char *str_field(struct ctx *c, struct jv *o, const char *key); /* in the line, or NULL */
uint64_t need_hex(struct ctx *c, struct jv *o, const char *key);
int flag(struct ctx *c, struct jv *o, const char *key);           /* true: 1 */
/* A record's CUDA device ordinal, -1 when absent (0..255). */
int64_t device_ordinal(struct ctx *c, struct jv *o);
/* A record's kind: its index, -1 for a kind from a newer shim. */
int kind_of(struct ctx *c, struct jv *o);
/* A reference to a stack: its index, 0 for none; with missing, a stack
 * the file has no record of sets *missing. */
uint32_t stack_ref(const struct mfile *f, int64_t id, int *missing);

/* One line (parsed in place) into the model, or bad(). */
void record(struct ctx *c, char *p, size_t len);
/* The parsers of the records that hold figures (snaprec.c). */
void rec_snapshot(struct ctx *c, struct jv *o);
void rec_oom(struct ctx *c, struct jv *o);
void rec_outcome(struct ctx *c, struct jv *o);
void rec_segment(struct ctx *c, struct jv *o);
void rec_trace(struct ctx *c, struct jv *o);
void rec_kept(struct ctx *c, struct jv *o);
void rec_searched(struct ctx *c, struct jv *o);

/* Reading lines (lines.c): the buffer, the source, the parser's arena. */
struct lines {
	struct ctx c;
	struct jdoc d;
	struct src in;
	char *buf;
	size_t cap, have;
	uint64_t taken;        /* JSONL bytes before buf[0] */
	long lines;            /* lines taken */
	long frame_lines;      /* zstd: lines taken before the frame being decoded */
	int eof, cut;          /* cut: the last line or frame was cut short */
	char damage[700];      /* why reading stopped early: "FILE:LINE: ..." */
};
void lines_open(struct lines *l, struct mfile *f, const char *path, int fd, size_t cap);
/* Read (at most budget bytes of the file; wait: a file still being
 * written) and take its whole lines into the model.  Returns the lines
 * taken; reading stops for good at damage (l->damage) or the end of the
 * file (l->eof, without wait). */
long lines_read(struct lines *l, size_t budget, int wait);
void lines_close(struct lines *l);

/* One whole file into f (load.c): 0, with what came before any damage
 * (warned, f->damaged); -1 when it has nothing usable: why says so, and
 * whether it was damage (else empty, or cut in its first line or frame). */
struct load_why {
	char text[700];
	int damage;
};
int load_file(struct mfile *f, const char *path, struct load_why *why);
/* The same, with summary: only the header and each snapshot's totals and
 * marks (f->summary; summary.c). */
int load_file_as(struct mfile *f, const char *path, struct load_why *why, int summary);
/* One file as a summary, the fast way where the file allows (summary.c). */
int load_summary(struct mfile *f, const char *path, struct load_why *why);
/* A summary line (summary.c): whether line p[0..*len) is one a summary
 * reads (header, snapshot), found by its first bytes; a snapshot's
 * call-site rows are cut out of it in place (*len shortened). */
int summary_keep(char *p, size_t *len);
/* A line summary_keep skipped: a stack, pyframe or pystack record whose
 * id an earlier one named with other content is refused, as the full
 * reader refuses it (restated_stack), by its bytes as the shim writes them (it
 * says a record again byte for byte); the line is not parsed.  And the
 * table it keeps, freed. */
void summary_seen(struct ctx *c, const char *p, size_t len);
void summary_seen_free(struct ctx *c);
/* A file left out for damage: the exit status becomes 1. */
void load_refused(void);
void mfile_init(struct mfile *f, const char *path);

#endif
