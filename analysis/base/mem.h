/* mem.h — allocation that dies on failure, errors with exit codes: every
 * analysis file may call these. */
#ifndef MTA_MEM_H
#define MTA_MEM_H
#include <stddef.h>

enum { EXIT_OK = 0, EXIT_BAD_INPUT = 1, EXIT_USAGE = 2 };

/* qsort that accepts (NULL, 0): qsort's pointer must not be NULL. */
void xqsort(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *));
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Make room for need elements of elem bytes in p, whose capacity *cap
 * doubles (growth by one element is quadratic where realloc copies, as
 * under ASan: 250 k trace events took over 20 minutes). */
void *xgrow(void *p, size_t need, size_t *cap, size_t elem);
char *xstrndup(const char *s, size_t n);
/* "memtally: ..." on stderr, then exit(code). */
#ifdef MT_FUZZ
#include <setjmp.h>
/* Fuzz builds only: set by the harness, die() jumps there instead of
 * exiting (test/fuzz/fuzz_cmd.c). */
extern jmp_buf *mt_fuzz_jmp;
#endif
void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
