/* sites.h — call sites as people read them: a name from the most
 * informative frames, a key that is stable across runs (module and offset,
 * not addresses), and the whole stack on demand. */
#ifndef MTA_SITES_H
#define MTA_SITES_H
#include "model/model.h"
#include "read/symbolize.h"
#include "base/util.h"
#include <stdio.h>

/* The frames of a stack, innermost first, inline chains expanded; hybrid
 * (Python frames where the native stack entered the interpreter loop)
 * unless f->native (--native).  Returns the count (<= max). */
int site_frames(const struct mfile *f, uint32_t stack, struct frame *out, int max);

/* The frame a call site is named by: the innermost Python frame when
 * there is one; else the first that is not the allocator's, the shim's,
 * libc's or the C++ runtime's (0 when all are). */
int site_first_informative(const struct frame *fr, int nf);
/* "func (file:line) < caller < caller": the first informative frame (the
 * innermost Python frame when there is one; else the allocator, shim, libc
 * and C++ runtime skipped) and up to ctx callers. */
const char *site_name(const struct mfile *f, uint32_t stack, int ctx, char *buf, size_t n);
/* func without its parameter list (and a trailing " const"), in buf, or
 * func itself when it has none. */
const char *site_short_func(const char *func, char *buf, size_t n);
/* Cut a name to what is left of the terminal's line after column col:
 * the last callers first, then the end ("..."); whole on a pipe. */
void site_fit(char *name, int col);
/* The function of the first informative frame (for matching in tests and
 * JSON), or "[unknown]". */
const char *site_func(const struct mfile *f, uint32_t stack, char *buf, size_t n);
/* Keep of v[0..n) the call sites whose memory is on CUDA device dev
 * (stack_device), in order; returns how many. */
size_t sites_on_device(const struct mfile *f, struct site *v, size_t n, int dev);
/* Stable identity across files: module basename + offset of each frame. */
char *site_key(const struct mfile *f, uint32_t stack, int kind);
/* The whole symbolized stack, one frame a line, with a prefix. */
void site_print_stack(FILE *out, const struct mfile *f, uint32_t stack, const char *prefix);
/* JSON array of the symbolized frames. */
void site_json_stack(struct sb *s, const struct mfile *f, uint32_t stack);
/* `"function":...,"where":...,"frames":[...]` of a stack (--json rows). */
void site_json_names(struct sb *j, const struct mfile *f, uint32_t stack);

/* The name of a call site's row (site_name with two callers), computed
 * once per Python stack for stacks made of Python frames alone; nm keeps
 * those names (zeroed at first, namer_free after). */
struct namer {
	char **byp;
	size_t n;
};
const char *site_group_name(const struct mfile *f, uint32_t stack, char *buf, size_t n,
			    struct namer *nm);
void namer_free(struct namer *nm);

/* Rows that print alike are one row: sites with the same name and kind
 * (cc1's "xmalloc < et_new_tree < calculate_dominance_info", reached by
 * three return addresses; two calls of one function from main) are
 * summed, and the row says how many there were.  From sites v[0..n)
 * (sorted largest first), of kind (< 0: all): every site is named and
 * counts in its row (a row's sum is exact, however small its sites:
 * PyTorch's import, 178 k sites of one name); each site its own row
 * when apart (--stacks: the stacks tell them apart), up to limit rows.
 * v[0..3]: live, count, allocs, allocated; at_peak: at the peak, live
 * now (sites without bytes at the peak left out).  Sorted by v[0]. */
struct site_row {
	char *name;
	int kind, nsites;
	uint32_t stack; /* the first site's, for --stacks */
	int64_t v[4];
};
struct site_row *site_rows(const struct mfile *f, const struct site *v, size_t n, int kind,
			   int apart, int limit, int at_peak, size_t *nr);
/* The row's name, with "[N sites]" when merged, fitted after column col
 * unless whole. */
void site_row_name(const struct site_row *r, int col, int whole, char *out, size_t n);
void site_rows_free(struct site_row *r, size_t n);
/* Sort sites (copied) by live bytes, largest first. */
struct site *sites_sorted(struct mfile *f, const struct snap *s, size_t *n);

#endif
