/* text.h — text for a person: sizes, durations, rates, the terminal's
 * width, and escaping what reaches it. */
#ifndef MTA_TEXT_H
#define MTA_TEXT_H
#include <stddef.h>
#include <stdint.h>

/* Columns of the terminal on stdout ($COLUMNS first); 0 when stdout is
 * not a terminal (text then keeps whole names). */
int term_width(void);
/* Text for a terminal: buf appended to out with each control character
 * (but newline and tab) and each byte that is not part of a UTF-8
 * character as \xNN.  A character cut by the end of buf is held in t
 * until the next call completes it. */
struct sb;
struct textesc { unsigned char carry[4]; int n; };
void text_escape(struct textesc *t, const char *buf, size_t n, struct sb *out);

/* "1.5 MiB", "-32 KiB", "123 B" into buf (>= 16 bytes); returns buf. */
const char *human(int64_t bytes, char *buf);
/* "2m03s", "1.5s" */
const char *human_ms(int64_t ms, char *buf);
/* A growth rate as people read it (leaks, ranks, top): per step when
 * per_step is a number; else per hour over a window of an hour or more;
 * over a shorter one what it came to there ("7.0 MiB in 300ms" with
 * say_window, else "7.0 MiB"), not a per-hour figure a sub-second run
 * cannot stand for; "?" for a NAN rate. */
const char *rate_text(double per_hour, double per_step, int64_t window_ms, int say_window,
		      char *buf, size_t n);

#endif
