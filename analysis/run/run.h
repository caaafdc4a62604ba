/* run/run.h — the parts of `memtally run` with names of their own
 * (run.c is the command: its options, the environment it sets, the wait):
 * the lock on the output directory (lock.c) and the shim's warnings said
 * once at the end (warnings.c). */
#ifndef MT_AN_RUN_H
#define MT_AN_RUN_H
#include <time.h>

/* The memtally files in dir (lock.c: an earlier run's are refused). */
int count_files(const char *dir);

/* Take the run lock on absout, refusing a directory another run writes,
 * or one holding an earlier run's files unless append; the lock's path,
 * for run_unlock.  Exits with a usage error when refused. */
char *run_lock(const char *absout, int append);
void run_unlock(char *path);

/* Each distinct warning record of the files in absout made since start,
 * once, on stderr, with how many processes said it. */
void print_warnings(const char *absout, const struct timespec *start);

#endif
