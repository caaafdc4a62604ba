/*
 * signals.h — the snapshot signal (MEMTALLY_SIGNAL): installed at start,
 * with the program's own handler for it chained, before or after us.
 * Entry-point layer: a signal only triggers the writer (trigger.h).
 */
#ifndef MT_SIGNALS_H
#define MT_SIGNALS_H

/* The constructor's part: install the handler.  Never allocates. */
void mt_signal_init(void);

#endif
