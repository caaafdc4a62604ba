/*
 * signals.h — the snapshot signal (MEMTALLY_SIGNAL): installed at start,
 * with the program's own handler for it chained, before or after us.
 * And deaths by signal: a final snapshot, then the default action
 * (signals.c says when and why it is safe).
 * Entry-point layer: the snapshot signal only triggers the writer
 * (trigger.h); a death writes its snapshot itself (snapshot.h).
 */
#ifndef MT_SIGNALS_H
#define MT_SIGNALS_H

/* The constructor's part: install the handlers (the snapshot signal's,
 * and ours for each death signal still at SIG_DFL).  Never allocates. */
void mt_signal_init(void);
/* fork child: the handlers write the child's file now. */
void mt_signal_postfork_child(void);

#endif
