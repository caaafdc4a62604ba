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
/* The interpreter's loop (_PyEval_EvalFrameDefault), where Python frames go. */
int site_eval_loop(const struct frame *fr);
/* A path's last part (the file's name). */
const char *site_base_name(const char *p);
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
	char **byu; /* the user's line per Python stack, "" when none */
	size_t nu;
};
const char *site_group_name(const struct mfile *f, uint32_t stack, char *buf, size_t n,
			    struct namer *nm);
void namer_free(struct namer *nm);

/* ---- the user's line (userline.c) ---- */

/* In a Python process (not --native, not --by site) a row is named by
 * the innermost frame of the program's own code, its source text where
 * the file is readable, then the library frame the allocation came
 * through: "train.py:29  out = model(x)   via conv.py:459 _conv_forward".
 * The part before SITE_VIA is what makes the row (its key). */
#define SITE_VIA "   via "
/* memtally's own Python frames: the start-up hook (sitecustomize.py's
 * memtally functions, or beside memtally's scripts), memtally_torch.py,
 * memtally_cuda.py, the user API beside them, the package _memtally/. */
int site_own_frame(const struct frame *fr);
/* Drop those frames from fr[0..n), and the importlib frames that only
 * lead into them; returns the count left. */
int site_drop_own(struct frame *fr, int n);
/* A Python frame of the program's own code: not the standard library,
 * site-packages or dist-packages, "<frozen ...>"/"<string>", nor memtally's. */
int site_py_user(const struct frame *fr);
/* Line `line` of source file `path`, stripped and cut short; "" when
 * unreadable.  Files are read once. */
const char *site_src_line(const char *path, int line, char *buf, size_t n);
/* The key of stack's row (the user's line alone) in buf; 0 when the
 * stack is not named by a user line (native naming then). */
int site_user_key(const struct mfile *f, uint32_t stack, char *buf, size_t n);
/* Key and " via ..." of one stack; 0 as site_user_key. */
int site_user_name(const struct mfile *f, uint32_t stack, char *buf, size_t n);
/* A row named by its key (allocated) gets its largest site's " via ..."
 * (stack's): returns the name to keep (name itself, or a new one with
 * name freed). */
char *site_label(const struct mfile *f, char *name, uint32_t stack);
/* The length of a row name's key (up to SITE_VIA), and whether two names
 * are one row's (rows are matched across files and moments by key). */
size_t site_key_len(const char *name);
int site_same_row(const char *a, const char *b);

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
	int64_t asked; /* mapping rows: the bytes asked for, of v[3] allocated */
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
