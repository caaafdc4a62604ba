/* sb.h — growable strings, and JSON strings and numbers in them. */
#ifndef MTA_SB_H
#define MTA_SB_H
#include <stddef.h>

/* Growable string. */
struct sb { char *p; size_t len, cap; };
void sb_putc(struct sb *s, char c);
void sb_puts(struct sb *s, const char *str);
/* v in decimal (the page writes 10^5 numbers: printf was a tenth of its time) */
void sb_i64(struct sb *s, long long v);
void sb_printf(struct sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_json_str(struct sb *s, const char *str); /* "escaped" */
/* A number as JSON: fmt (a printf format of one double) when finite, else
 * null (inf and nan are not JSON). */
void sb_json_num(struct sb *s, const char *fmt, double v);
void sb_free(struct sb *s);
void sb_puts_n(struct sb *s, const char *p, size_t n);
#endif
