/*
 * marks.c — step marks (marks.h): a small lock-free table the C API fills
 * and every snapshot lists.
 */
#include "platform/glue.h"
#include "state/marks.h"
#include "platform/buf.h"
#include <string.h>

#define MT_MARKS 8

static struct {
	int state;      /* 0 free, 1 being named, 2 published */
	char name[32];
	uint64_t value; /* a double's bits, stored atomically */
} marks[MT_MARKS];

/* The value a slot had, from its bits (exchanged atomically). */
static void
was(uint64_t bits, double *old) {
	if (old)
		memcpy(old, &bits, sizeof *old);
}

int
mt_mark_set(const char *name, double value, double *old) {
	if (old)
		*old = __builtin_nan("");
	size_t n = name ? strnlen(name, 31) : 0;
	if (n == 31) /* cut: not inside a character */
		n = mt_utf8_cut(name, n);
	if (!n)
		return -1;
	uint64_t bits;
	memcpy(&bits, &value, sizeof bits);
	if (n == 4 && !memcmp(name, "step", 4)) /* call-site peaks say their step */
		__atomic_store_n(&mt_step_now,
				 value >= 0 && value < 2147483647.0 ? (int32_t)value : -1,
				 __ATOMIC_RELAXED);
	for (int i = 0; i < MT_MARKS; i++) {
		int st = __atomic_load_n(&marks[i].state, __ATOMIC_ACQUIRE);
		if (st == 2 && !strncmp(marks[i].name, name, n) && !marks[i].name[n]) {
			was(__atomic_exchange_n(&marks[i].value, bits, __ATOMIC_ACQ_REL), old);
			return 0;
		}
		if (st == 0) {
			int e = 0;
			if (!__atomic_compare_exchange_n(&marks[i].state, &e, 1, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				i--; /* lost the race: look at this slot again */
				continue;
			}
			memcpy(marks[i].name, name, n);
			marks[i].name[n] = 0;
			__atomic_store_n(&marks[i].value, bits, __ATOMIC_RELEASE);
			__atomic_store_n(&marks[i].state, 2, __ATOMIC_RELEASE);
			return 0;
		}
		while (st == 1) /* another thread is naming this slot */
			st = __atomic_load_n(&marks[i].state, __ATOMIC_ACQUIRE);
		if (st == 2 && !strncmp(marks[i].name, name, n) && !marks[i].name[n]) {
			was(__atomic_exchange_n(&marks[i].value, bits, __ATOMIC_ACQ_REL), old);
			return 0;
		}
	}
	return -1;
}

int
mt_mark_get(const char *name, double *value) {
	for (int i = 0; i < MT_MARKS; i++) {
		if (__atomic_load_n(&marks[i].state, __ATOMIC_ACQUIRE) != 2 ||
		    strncmp(marks[i].name, name, sizeof marks[i].name))
			continue;
		uint64_t bits = __atomic_load_n(&marks[i].value, __ATOMIC_ACQUIRE);
		memcpy(value, &bits, sizeof *value);
		return 0;
	}
	return -1;
}

void
mt_marks_json(struct mt_buf *b) {
	int first = 1;
	for (int i = 0; i < MT_MARKS; i++) {
		if (__atomic_load_n(&marks[i].state, __ATOMIC_ACQUIRE) != 2)
			continue;
		uint64_t bits = __atomic_load_n(&marks[i].value, __ATOMIC_ACQUIRE);
		double v;
		memcpy(&v, &bits, sizeof v);
		mt_buf_puts(b, first ? MT_KEY(MT_F_MARKS) "{" : ",");
		first = 0;
		mt_buf_jstr(b, marks[i].name);
		mt_buf_putc(b, ':');
		if (v == (double)(int64_t)v)
			mt_buf_i64(b, (int64_t)v);
		else
			mt_buf_double(b, v, 6);
	}
	if (!first)
		mt_buf_puts(b, "},");
}
