/*
 * trigger.h — what asks for a snapshot and how the writer thread answers:
 * the pending reasons, the futex words the writer sleeps and the C API
 * waits on, and request tickets with their labels.  State layer: calls
 * only the platform.
 * Rules: never calls malloc; mt_trigger is async-signal-safe; the request
 * lock is held for a 128-byte copy, never across a call out.
 */
#ifndef MT_TRIGGER_H
#define MT_TRIGGER_H
#include <stdint.h>
#include <time.h>

/* Snapshot triggers (bits), in order of precedence. */
enum { MT_REASON_EXIT = 1, MT_REASON_SIGNAL = 2, MT_REASON_REQUEST = 4,
       MT_REASON_EVERY = 8, MT_REASON_INTERVAL = 16, MT_REASON_PREOOM = 32,
       MT_REASON_RENDER = 64 /* not a snapshot: render OOM dumps */,
       MT_REASON_RISE = 128, MT_REASON_STEP = 256 };
enum { MT_LABEL_MAX = 128 };

/* Ask the writer thread for a snapshot.  Async-signal-safe.  A reason
 * already pending is merged with it: counted (mt_trigger_coalesced, the
 * snapshot's shim.coalesced). */
void mt_trigger(int reason);
/* Wake the writer without a reason (it looks at its quit flag). */
void mt_trigger_wake(void);
uint64_t mt_trigger_coalesced(void);
/* Whether a reason waits for a writer. */
int mt_trigger_pending(void);
/* The writer's side, registered by the writer (output/writer.c) so that
 * lower layers reach it without calling up: sync writes a snapshot now
 * in the calling thread (MEMTALLY_EVERY), start starts the thread. */
void mt_trigger_set_writer(void (*sync)(int reason), void (*start)(void));
void mt_trigger_sync(int reason);
void mt_trigger_start_writer(void);
/* Whether the writer thread runs (a relaxed load: the hooks read it on
 * every tracked allocation, inline). */
extern int mt_writer_running_;
static inline int
mt_writer_up(void) {
	return __atomic_load_n(&mt_writer_running_, __ATOMIC_RELAXED);
}
/* The snapshot's name for a set of reason bits ("exit", "request", ...). */
const char *mt_reason_name(int bits);

/* A request's label as a snapshot carries it: at most MT_LABEL_MAX - 1
 * bytes, cut between characters. */
void mt_label_copy(char dst[MT_LABEL_MAX], const char *label);
/* C API side: take a ticket with this label and wait (<= 10 s) until a
 * snapshot begun after it is on disk.  0, or -1 on time-out.  Returns 1
 * without waiting when no writer thread runs (the caller writes itself). */
int mt_request_wait(const char *label);

/* Writer side. */
void mt_writer_set_running(int running);
/* The wake word to sleep on, read before looking for work. */
uint32_t mt_trigger_word(void);
/* Take the pending reason bits (cleared). */
int mt_trigger_take(void);
/* Before writing: the newest ticket and its label (label[0] = 0: none). */
uint32_t mt_request_take(char label[MT_LABEL_MAX]);
/* After writing: tickets up to served are answered; wakes the waiters. */
void mt_request_served(uint32_t served);
/* Sleep until triggered after word w, or until the timeout (NULL: none). */
void mt_trigger_sleep(uint32_t w, const struct timespec *ts);

/* fork: the request lock around fork; the child forgets what was pending. */
void mt_trigger_prefork(void);
void mt_trigger_postfork_parent(void);
void mt_trigger_postfork_child(int follow);

#endif
