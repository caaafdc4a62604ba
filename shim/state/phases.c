/*
 * phases.c — phases and the step's workload (phases.h): a name table, the
 * stack of open phases, each name's last spans, and the workload object,
 * under one short lock; every snapshot lists them.
 */
#include "platform/glue.h"
#include "state/phases.h"
#include "platform/buf.h"
#include "format.h"
#include <string.h>

#define SPANS 8  /* each name's last spans kept for the next snapshot */
#define DEPTH 8  /* open phases, nested */
#define WORK 1024

uint8_t mt_phase_now;
uint8_t mt_peak_phase[MT_PEAK_SLOTS];
int32_t mt_peak_step[MT_PEAK_SLOTS];

static mt_lock_t lock;
static struct {
	char name[32];
	uint64_t count, ns;      /* spans ended, time in them */
	uint64_t ended, listed;  /* spans ended / listed by a snapshot */
	struct { uint32_t b_ms, e_ms; int32_t step; } span[SPANS];
} names[MT_PHASE_NAMES];
static int nnames;
static struct { uint8_t id; uint32_t b_ms; uint64_t b_ns; int32_t step; } open_[DEPTH];
static int nopen;
static char work[WORK];
static size_t nwork;

static int
find(const char *name, size_t n, int add) {
	for (int i = 0; i < nnames; i++)
		if (!strncmp(names[i].name, name, n) && !names[i].name[n])
			return i;
	if (!add || nnames == MT_PHASE_NAMES)
		return -1;
	memcpy(names[nnames].name, name, n);
	names[nnames].name[n] = 0;
	return nnames++;
}

int
mt_phase_mark(const char *name, int begin) {
	size_t n = name ? strnlen(name, 31) : 0;
	if (n == 31)
		n = mt_utf8_cut(name, n);
	if (!n)
		return -1;
	uint64_t ns = mt_now_ns();
	uint32_t ms = (uint32_t)mt_ms_at(ns); /* (glue.h mt_ms_since_start_fine's clock) */
	int32_t step = __atomic_load_n(&mt_step_now, __ATOMIC_RELAXED);
	int r = -1;
	mt_lock(&lock);
	int id = find(name, n, begin);
	if (id >= 0 && begin && nopen < DEPTH) {
		open_[nopen].id = (uint8_t)id;
		open_[nopen].b_ms = ms;
		open_[nopen].b_ns = ns;
		open_[nopen].step = step;
		nopen++;
		r = 0;
	} else if (id >= 0 && !begin) {
		int k = nopen - 1;
		while (k >= 0 && open_[k].id != id)
			k--;
		if (k >= 0) {
			__typeof__(names[0]) *p = &names[id];
			uint64_t i = p->ended++ % SPANS;
			p->span[i].b_ms = open_[k].b_ms;
			p->span[i].e_ms = ms;
			p->span[i].step = open_[k].step;
			p->count++;
			p->ns += ns - open_[k].b_ns;
			memmove(&open_[k], &open_[k + 1], (size_t)(nopen - k - 1) * sizeof open_[0]);
			nopen--;
			r = 0;
		}
	}
	__atomic_store_n(&mt_phase_now, nopen ? (uint8_t)(open_[nopen - 1].id + 1) : 0,
			 __ATOMIC_RELAXED);
	mt_unlock(&lock);
	return r;
}

int
mt_workload_set(const char *json, size_t n) {
	if (json && (n >= WORK || n < 2 || json[0] != '{' || json[n - 1] != '}' ||
		     memchr(json, '\n', n) || memchr(json, '\r', n)))
		return -1;
	mt_lock(&lock);
	nwork = json ? n : 0;
	if (json)
		memcpy(work, json, n);
	mt_unlock(&lock);
	return 0;
}

void
mt_phases_json(struct mt_buf *b, int advance) {
	mt_lock(&lock);
	if (nopen) {
		mt_buf_puts(b, MT_KEY(MT_F_PHASE));
		mt_buf_jstr(b, names[open_[nopen - 1].id].name);
		mt_buf_putc(b, ',');
	}
	int first = 1;
	for (int i = 0; i < nnames; i++) {
		__typeof__(names[0]) *p = &names[i];
		if (!p->count)
			continue;
		mt_buf_puts(b, first ? MT_KEY(MT_F_PHASES) "{" : ",");
		first = 0;
		mt_buf_jstr(b, p->name);
		mt_buf_printf(b, ":{" MT_KEY(MT_F_COUNT) "%lu," MT_KEY(MT_F_MS) "%lu",
			      (unsigned long)p->count, (unsigned long)(p->ns / 1000000u));
		uint64_t from = p->listed;
		if (p->ended - from > SPANS)
			from = p->ended - SPANS;
		if (from < p->ended) {
			mt_buf_puts(b, "," MT_KEY(MT_F_SPANS) "[");
			for (uint64_t j = from; j < p->ended; j++) {
				const __typeof__(p->span[0]) *s = &p->span[j % SPANS];
				mt_buf_printf(b, "%s[%lu,%lu,%ld]", j > from ? "," : "",
					      (unsigned long)s->b_ms, (unsigned long)s->e_ms,
					      (long)s->step);
			}
			mt_buf_putc(b, ']');
		}
		if (advance)
			p->listed = p->ended;
		mt_buf_putc(b, '}');
	}
	if (!first)
		mt_buf_puts(b, "},");
	if (nwork) {
		mt_buf_puts(b, MT_KEY(MT_F_WORKLOAD));
		mt_buf_put(b, work, nwork);
		mt_buf_putc(b, ',');
	}
	mt_unlock(&lock);
}

void
mt_phases_peak_json(struct mt_buf *b, int slot) {
	int id = __atomic_load_n(&mt_peak_phase[slot], __ATOMIC_RELAXED);
	int32_t step = __atomic_load_n(&mt_peak_step[slot], __ATOMIC_RELAXED);
	if (id > 0 && id <= nnames) {
		mt_buf_puts(b, "," MT_KEY(MT_F_PEAK_PHASE));
		mt_buf_jstr(b, names[id - 1].name);
	}
	if (step > 0) { /* stored + 1: 0 is none */
		mt_buf_puts(b, "," MT_KEY(MT_F_PEAK_STEP));
		mt_buf_i64(b, step - 1);
	}
}

void
mt_phases_postfork_child(void) {
	lock.v = 0;
}
