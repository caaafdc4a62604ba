/*
 * trigger.c — snapshot triggers, the writer's wake-up and the C API's
 * request tickets (trigger.h).
 */
#include "platform/glue.h"
#include "state/trigger.h"
#include "platform/buf.h"
#include <linux/futex.h>
#include <string.h>

static uint32_t wake_word;  /* futex: bumped by every trigger */
int mt_trigger_pending_;    /* MT_REASON_* bits not yet written */
#define pending mt_trigger_pending_
static uint32_t done_word;  /* futex: bumped after each snapshot */
int mt_writer_running_; /* read inline by mt_writer_up */
#define writer_running mt_writer_running_
static uint32_t req_ticket; /* requests taken (C API) */
static uint32_t req_served; /* requests covered by a written snapshot */
/* A request's label travels with its ticket: both change under req_lock,
 * and the writer takes them together before it writes, so a label set
 * while another snapshot is being written names the next one (found by
 * test_stress under CI: a signal snapshot in flight cleared "end"). */
static mt_lock_t req_lock;
static char req_label[MT_LABEL_MAX];

static long
futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts) {
	return mt_sys(SYS_futex, w, op, val, ts, 0, 0);
}

static uint64_t coalesced; /* triggers merged into one already pending */
static void (*sync_writer)(int reason);
static void (*start_writer)(void);

void
mt_trigger(int reason) {
	if (__atomic_fetch_or(&pending, reason, __ATOMIC_RELEASE) & reason)
		__atomic_add_fetch(&coalesced, 1, __ATOMIC_RELAXED);
	mt_trigger_wake();
}

void
mt_trigger_wake(void) {
	__atomic_add_fetch(&wake_word, 1, __ATOMIC_RELEASE);
	futex(&wake_word, FUTEX_WAKE_PRIVATE, 1, NULL);
}

uint64_t
mt_trigger_coalesced(void) {
	return __atomic_load_n(&coalesced, __ATOMIC_RELAXED);
}

void
mt_trigger_set_writer(void (*sync)(int reason), void (*start)(void)) {
	sync_writer = sync;
	start_writer = start;
}

void
mt_trigger_sync(int reason) {
	if (sync_writer)
		sync_writer(reason);
}

void
mt_trigger_start_writer(void) {
	if (start_writer)
		start_writer();
}


static uint64_t cad_steps, cad_taken, cad_stride = 1;

int
mt_cadence_step(void) {
	uint64_t k = __atomic_add_fetch(&cad_steps, 1, __ATOMIC_RELAXED);
	uint64_t stride = __atomic_load_n(&cad_stride, __ATOMIC_RELAXED);
	if (k % stride)
		return 0;
	if (__atomic_add_fetch(&cad_taken, 1, __ATOMIC_RELAXED) % MT_CADENCE_RUN == 0)
		__atomic_store_n(&cad_stride, stride * 2, __ATOMIC_RELAXED);
	return 1;
}

uint64_t
mt_cadence_steps(void) {
	return __atomic_load_n(&cad_steps, __ATOMIC_RELAXED);
}

#define CAD_T0 20000000ull /* ns: the first period */
static struct {
	uint64_t next, period, taken, steps_seen, floor;
} ct;

void
mt_cadence_init(uint64_t now) {
	ct.period = CAD_T0;
	ct.taken = 0;
	ct.floor = 0;
	ct.steps_seen = mt_cadence_steps();
	__atomic_store_n(&ct.next, now + CAD_T0, __ATOMIC_RELEASE);
}

uint64_t
mt_cadence_time_next(void) {
	return __atomic_load_n(&ct.next, __ATOMIC_ACQUIRE);
}

int
mt_cadence_time_due(uint64_t now) {
	uint64_t next = __atomic_load_n(&ct.next, __ATOMIC_ACQUIRE);
	if (!next || now < next)
		return 0;
	/* one caller moves it on; the others see the new next */
	uint64_t period = __atomic_load_n(&ct.period, __ATOMIC_RELAXED);
	uint64_t after = now + period;
	if (after < ct.floor)
		after = ct.floor;
	if (!__atomic_compare_exchange_n(&ct.next, &next, after, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return 0;
	uint64_t steps = mt_cadence_steps();
	if (steps != __atomic_exchange_n(&ct.steps_seen, steps, __ATOMIC_RELAXED))
		return 0; /* steps moved meanwhile: theirs describe the run */
	if (__atomic_add_fetch(&ct.taken, 1, __ATOMIC_RELAXED) % MT_CADENCE_RUN == 0)
		__atomic_store_n(&ct.period, period * 2, __ATOMIC_RELAXED);
	return 1;
}

void
mt_cadence_wrote(uint64_t end, uint64_t cost) {
	if (!cost)
		return;
	uint64_t floor = end + 19 * cost;
	__atomic_store_n(&ct.floor, floor, __ATOMIC_RELAXED);
	uint64_t next = __atomic_load_n(&ct.next, __ATOMIC_ACQUIRE);
	while (next && next < floor &&
	       !__atomic_compare_exchange_n(&ct.next, &next, floor, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
}

const char *
mt_reason_name(int bits) {
	if (bits & MT_REASON_EXIT)
		return "exit";
	if (bits & MT_REASON_PREOOM)
		return "preoom";
	/* a request is waited on and carries its label: it names the
	 * snapshot even when a signal arrived at the same time */
	if (bits & MT_REASON_REQUEST)
		return "request";
	if (bits & MT_REASON_SIGNAL)
		return "signal";
	if (bits & MT_REASON_STEP)
		return "step";
	if (bits & MT_REASON_EVERY)
		return "every";
	if (bits & MT_REASON_RISE)
		return "rise";
	return "interval";
}

void
mt_label_copy(char dst[MT_LABEL_MAX], const char *label) {
	size_t n = label ? strnlen(label, MT_LABEL_MAX - 1) : 0;
	if (n == MT_LABEL_MAX - 1) /* cut: not inside a character */
		n = mt_utf8_cut(label, n);
	memcpy(dst, label ? label : "", n);
	dst[n] = 0;
}

int
mt_request_wait(const char *label) {
	if (!__atomic_load_n(&writer_running, __ATOMIC_ACQUIRE))
		return 1;
	mt_lock(&req_lock);
	mt_label_copy(req_label, label);
	uint32_t ticket = __atomic_add_fetch(&req_ticket, 1, __ATOMIC_ACQ_REL);
	mt_unlock(&req_lock);
	mt_trigger(MT_REASON_REQUEST);
	uint64_t deadline = mt_now_ns() + 10000000000ull;
	for (;;) {
		uint32_t d = __atomic_load_n(&done_word, __ATOMIC_ACQUIRE);
		if ((int32_t)(__atomic_load_n(&req_served, __ATOMIC_ACQUIRE) - ticket) >= 0)
			return 0;
		if (mt_now_ns() >= deadline)
			return -1;
		struct timespec ts = {0, 50000000};
		futex(&done_word, FUTEX_WAIT_PRIVATE, d, &ts);
	}
}

void
mt_writer_set_running(int running) {
	__atomic_store_n(&writer_running, running, __ATOMIC_RELEASE);
}

uint32_t
mt_trigger_word(void) {
	return __atomic_load_n(&wake_word, __ATOMIC_ACQUIRE);
}

int
mt_trigger_take(void) {
	return __atomic_exchange_n(&pending, 0, __ATOMIC_ACQ_REL);
}

uint32_t
mt_request_take(char label[MT_LABEL_MAX]) {
	mt_lock(&req_lock);
	uint32_t serving = __atomic_load_n(&req_ticket, __ATOMIC_ACQUIRE);
	memcpy(label, req_label, MT_LABEL_MAX);
	req_label[0] = 0;
	mt_unlock(&req_lock);
	return serving;
}

void
mt_request_served(uint32_t served) {
	__atomic_store_n(&req_served, served, __ATOMIC_RELEASE);
	__atomic_add_fetch(&done_word, 1, __ATOMIC_RELEASE);
	futex(&done_word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
}

void
mt_trigger_sleep(uint32_t w, const struct timespec *ts) {
	futex(&wake_word, FUTEX_WAIT_PRIVATE, w, ts);
}

void
mt_trigger_prefork(void) {
	mt_lock(&req_lock);
}

void
mt_trigger_postfork_parent(void) {
	mt_unlock(&req_lock);
}

void
mt_trigger_postfork_child(int follow) {
	mt_unlock(&req_lock);
	req_label[0] = 0;
	if (follow)
		pending = 0;
	writer_running = 0; /* the child starts its own */
	coalesced = 0;
	cad_steps = cad_taken = 0; /* its own cadence, from its own start */
	cad_stride = 1;
	if (ct.next)
		mt_cadence_init(mt_now_ns());
}
