/* sites.h — call sites as people read them: a name from the most
 * informative frames, a key that is stable across runs (module and offset,
 * not addresses), and the whole stack on demand. */
#ifndef MTA_SITES_H
#define MTA_SITES_H
#include "model.h"
#include "symbolize.h"
#include "util.h"
#include <stdio.h>

/* Frames shown: 0 hybrid (Python frames where the native stack entered
 * the interpreter loop; the default), 1 native only (--native). */
extern int sites_native_only;
/* The frames of a stack, innermost first, inline chains expanded; hybrid
 * unless --native.  Returns the count (<= max). */
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
/* Stable identity across files: module basename + offset of each frame. */
char *site_key(const struct mfile *f, uint32_t stack, int kind);
/* The whole symbolized stack, one frame a line, with a prefix. */
void site_print_stack(FILE *out, const struct mfile *f, uint32_t stack, const char *prefix);
/* JSON array of the symbolized frames. */
void site_json_stack(struct sb *s, const struct mfile *f, uint32_t stack);
/* `"function":...,"where":...,"frames":[...]` of a stack (--json rows). */
void site_json_names(struct sb *j, const struct mfile *f, uint32_t stack);

/* Sort sites (copied) by live bytes, largest first. */
struct site *sites_sorted(struct mfile *f, const struct snap *s, size_t *n);

#endif
