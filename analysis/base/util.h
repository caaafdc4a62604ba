/* util.h — the analysis command's small helpers: allocation that dies on
 * failure, errors with exit codes, growable strings, number formatting. */
#ifndef MTA_UTIL_H
#define MTA_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "shim/format.h" /* mt_utf8_len */

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

/* write(2) all of data, retrying short writes and EINTR: 0 or an errno. */
int write_all(int fd, const void *data, size_t len);
/* Write len bytes to path whole: into a new file beside it, then renamed
 * over it, so a reader never sees half a file and a link at path is
 * replaced, not followed.  Dies (exit 2) naming path on an error. */
void write_output(const char *path, const void *data, size_t len);

/* Growable string. */
struct sb { char *p; size_t len, cap; };
void sb_putc(struct sb *s, char c);
void sb_puts(struct sb *s, const char *str);
void sb_printf(struct sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_json_str(struct sb *s, const char *str); /* "escaped" */
/* A number as JSON: fmt (a printf format of one double) when finite, else
 * null (inf and nan are not JSON). */
void sb_json_num(struct sb *s, const char *fmt, double v);
void sb_free(struct sb *s);
void sb_puts_n(struct sb *s, const char *p, size_t n);
/* Columns of the terminal on stdout ($COLUMNS first); 0 when stdout is
 * not a terminal (text then keeps whole names). */
int term_width(void);
/* Text for a terminal: buf appended to out with each control character
 * (but newline and tab) and each byte that is not part of a UTF-8
 * character as \xNN.  A character cut by the end of buf is held in t
 * until the next call completes it. */
struct textesc { unsigned char carry[4]; int n; };
void text_escape(struct textesc *t, const char *buf, size_t n, struct sb *out);

/* "1.5 MiB", "-32 KiB", "123 B" into buf (>= 16 bytes); returns buf. */
const char *human(int64_t bytes, char *buf);
const char *human_u64(uint64_t bytes, char *buf); /* up to "16.0 EiB" */
/* "2m03s", "1.5s", "-120ms" into buf (>= 16 bytes; cut beyond 10^11 hours) */
const char *human_ms(int64_t ms, char *buf);
/* An open-addressing index of byte strings (pprof's tables, functions'
 * rows): keyix_slot gives the value slot for key k[0..n), the key copied
 * in and *fresh set when it was not there (its value then 0). */
struct keyix {
	char **key;
	size_t *len;
	uint64_t *val;
	size_t cap, n;
};
uint64_t *keyix_slot(struct keyix *x, const char *k, size_t n, int *fresh);
void keyix_free(struct keyix *x);
/* A growth rate as people read it (leaks, ranks, top): per step when
 * per_step is a number; else per hour over a window of an hour or more;
 * over a shorter one what it came to there ("7.0 MiB in 300ms" with
 * say_window, else "7.0 MiB"), not a per-hour figure a sub-second run
 * cannot stand for; "?" for a NAN rate. */
const char *rate_text(double per_hour, double per_step, int64_t window_ms, int say_window,
		      char *buf, size_t n);

/* Robust statistics on doubles (the array is reordered). */
double median(double *v, size_t n);

#endif
