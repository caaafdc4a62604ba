/*
 * writer.h — the writer thread: when it starts, what it does, and how it
 * steps aside.  Output layer (above the records and dumps it writes);
 * the entry points and the lifecycle call it.
 *
 * Invariants that bind here:
 *  - A program that has one thread keeps one: the writer starts only when
 *    something needs it (periodic work: MEMTALLY_INTERVAL, a pre-OOM
 *    watch under a cgroup limit; or live bytes past 4 MiB with
 *    MEMTALLY_RISE; or a snapshot asked by the signal, a step or an OOM
 *    render; or the program's own second thread), and it is started from
 *    a thread of the program outside any lock of the shim, never from a
 *    signal handler.
 *  - A change of identity (the set*id family, setgroups, initgroups, and
 *    unshare/setns of a user namespace) never fails because of the
 *    writer: it is stopped and joined first and started again after, in
 *    the new identity.  glibc runs set*id on every thread; a thread
 *    without the caller's capabilities (setpriv keeps them in the calling
 *    thread only) made it abort.
 *  - MEMTALLY_EVERY snapshots are written by the allocating thread itself,
 *    at the N-th tracked allocation (exactly one per N), not by the writer.
 */
#ifndef MT_WRITER_H
#define MT_WRITER_H

/* At start (and in a fork child): register with the triggers and start
 * the thread if periodic work needs it from the first moment. */
void mt_writer_init(void);
/* Start the thread if it is not running (from a program thread, no shim
 * lock held).  Never from a signal handler. */
void mt_writer_start(void);
/* Stop it and wait until it is gone: 1 if it ran (give that to
 * mt_writer_resume), 0 if not. */
int mt_writer_park(void);
void mt_writer_resume(int was_running);
/* fork child: no writer runs there (the parent's did not come along). */
void mt_writer_postfork_child(void);

#endif
