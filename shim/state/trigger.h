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
/* Whether a reason waits for a writer (a relaxed load, inline: the
 * hooks read it while no writer thread runs). */
extern int mt_trigger_pending_;
static inline int
mt_trigger_pending(void) {
	return __atomic_load_n(&mt_trigger_pending_, __ATOMIC_RELAXED) != 0;
}
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

/* The cadence on steps (MEMTALLY_CADENCE): count one step (a "step" mark
 * that moved forward); 1 when it gets a snapshot.  The first 64 steps
 * each get one, then every 2nd step for 64 snapshots, every 4th, and so
 * on: a run of any length has 32 to 64 snapshots in its last half, and a
 * million steps make about 900.  Atomics: marks from two threads at once
 * may give one snapshot more or less, never a wrong one. */
int mt_cadence_step(void);
/* Steps counted so far (the writer's time cadence steps aside while they
 * move). */
uint64_t mt_cadence_steps(void);
enum { MT_CADENCE_RUN = 64 };
/* The cadence on time, for processes without steps (DataLoader workers,
 * C programs) and a stepped process's time before and after its steps: a
 * snapshot every 20 ms at first, the period doubling after each 64, and
 * never sooner than 19 times the last snapshot's writing time after it
 * ended (at most 5% of the time spent writing: the writing thread's CPU
 * time, which a loaded machine does not stretch as it does wall time).  While steps move, time
 * snapshots step aside (the steps' are the ones that describe the run).
 * mt_cadence_time_due: 1 when one is due at now (and it is counted: one
 * caller gets it); the writer thread asks it, and while none runs the
 * allocating thread does (charge.c).  mt_cadence_time_next: when the next
 * is due (0: off).  mt_cadence_wrote: a snapshot ended at end (monotonic)
 * and cost its thread cost ns of CPU. */
int mt_cadence_time_due(uint64_t now);
uint64_t mt_cadence_time_next(void);
void mt_cadence_wrote(uint64_t end, uint64_t cost);
void mt_cadence_init(uint64_t now);

/* fork: the request lock around fork; the child forgets what was pending. */
void mt_trigger_prefork(void);
void mt_trigger_postfork_parent(void);
void mt_trigger_postfork_child(int follow);

#endif
