/*
 * exec.h — the ways a process image ends without destructors: _exit and
 * _Exit (forked workers leave this way) and the exec family.  Each writes
 * the process's last snapshot first ("exit", or "exec"), synchronously on
 * the calling thread, then does what it was asked.
 * Entry-point layer: the hooks call only lower layers (snapshot, file,
 * python) and never each other's wrappers, only the real functions.
 * Rules: never calls malloc; errno as the real call leaves it.
 */
#ifndef MT_EXEC_H
#define MT_EXEC_H

/* Whose snapshots these are: the process's pid (a vfork child has
 * another and writes nothing) and whether its image began as a fork
 * child (not at exec).  The constructor sets it, and each fork child. */
void mt_exec_owner(long pid, int forked);
/* The exit snapshot, then no more: what the destructor and _exit run.
 * Nothing when not recording or in a vfork child. */
void mt_exit_snapshot(void);

#endif
