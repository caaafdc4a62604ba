/* text.c — text for a person: sizes, durations and rates as people read them, the terminal's width, and escaping for it (text.h). */
#include "base/text.h"
#include "base/sb.h"
#include "shim/format.h" /* mt_utf8_len */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Could p[0..avail) be the start of a UTF-8 character cut by the end of
 * a buffer?  (The bytes there are right so far; more would complete it.) */
static int
utf8_cut(const unsigned char *p, size_t avail) {
	unsigned c = p[0];
	size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
		   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (!len || avail >= len)
		return 0;
	for (size_t k = 1; k < avail; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if (avail >= 2 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
			   (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
		return 0;
	return 1;
}

void
text_escape(struct textesc *t, const char *buf, size_t n, struct sb *out) {
	/* the bytes a previous call held back come first */
	unsigned char tmp[8];
	size_t i = 0;
	while (t->n && i < n) {
		memcpy(tmp, t->carry, (size_t)t->n);
		size_t have = (size_t)t->n, take = 0;
		while (have < 4 && i + take < n)
			tmp[have++] = (unsigned char)buf[i + take++];
		size_t k = mt_utf8_len(tmp, have);
		if (k) { /* the character completed */
			sb_puts_n(out, (const char *)tmp, k);
			i += k - (size_t)t->n;
			t->n = 0;
		} else if (utf8_cut(tmp, have)) { /* still short: the input ran out */
			memcpy(t->carry, tmp, have);
			t->n = (int)have;
			return;
		} else { /* not UTF-8: its first byte escaped, the rest again */
			sb_printf(out, "\\x%02x", tmp[0]);
			memmove(t->carry, t->carry + 1, (size_t)--t->n);
		}
	}
	const unsigned char *p = (const unsigned char *)buf;
	while (i < n) {
		unsigned char c = p[i];
		if (c < 0x80) {
			if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
				sb_printf(out, "\\x%02x", c);
			else
				sb_putc(out, (char)c);
			i++;
			continue;
		}
		size_t k = mt_utf8_len(p + i, n - i);
		if (k) {
			sb_puts_n(out, (const char *)p + i, k);
			i += k;
		} else if (utf8_cut(p + i, n - i)) {
			memcpy(t->carry, p + i, n - i);
			t->n = (int)(n - i);
			return;
		} else {
			sb_printf(out, "\\x%02x", c);
			i++;
		}
	}
}

const char *
human(int64_t bytes, char *buf) {
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = bytes < 0 ? -(double)bytes : (double)bytes; /* -INT64_MIN overflows */
	int i = 0;
	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	const char *sign = bytes < 0 ? "-" : "";
	if (i == 0)
		snprintf(buf, 16, "%s%.0f B", sign, v);
	else
		snprintf(buf, 16, "%s%.*f %s", sign, v < 10 ? 2 : v < 100 ? 1 : 0, v, u[i]);
	return buf;
}

const char *
human_ms(int64_t ms, char *buf) {
	if (ms < 1000)
		snprintf(buf, 16, "%dms", (int)ms);
	else if (ms < 60000)
		snprintf(buf, 16, "%.1fs", (double)ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, 16, "%dm%02ds", (int)(ms / 60000), (int)(ms / 1000 % 60));
	else
		snprintf(buf, 16, "%dh%02dm", (int)(ms / 3600000), (int)(ms / 60000 % 60));
	return buf;
}

int
term_width(void) {
	static int w = -1;
	if (w >= 0)
		return w;
	struct winsize ws;
	const char *c = getenv("COLUMNS");
	if (c && atoi(c) > 0)
		w = atoi(c);
	else if (isatty(1) && !ioctl(1, TIOCGWINSZ, &ws) && ws.ws_col > 0)
		w = ws.ws_col;
	else
		w = 0;
	return w;
}

const char *
rate_text(double per_hour, double per_step, int64_t window_ms, int say_window, char *buf, size_t n) {
	char a[16], t[16];
	if (!isnan(per_step))
		snprintf(buf, n, "%s/step", human((int64_t)llround(per_step), a));
	else if (isnan(per_hour))
		snprintf(buf, n, "?");
	else if (window_ms >= 3600000)
		snprintf(buf, n, "%s/h", human((int64_t)per_hour, a));
	else
		snprintf(buf, n, "%s%s%s", human((int64_t)(per_hour * (double)window_ms / 3.6e6), a),
			 say_window ? " in " : "", say_window ? human_ms(window_ms, t) : "");
	return buf;
}
