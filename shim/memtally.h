/*
 * memtally.h — the C API a program may call when libmemtally.so is loaded.
 * Look the symbols up with dlsym(RTLD_DEFAULT, ...) so the program runs
 * unchanged without the shim, or link against the shim directly.
 */
#ifndef MEMTALLY_H
#define MEMTALLY_H
#ifdef __cplusplus
extern "C" {
#endif

/* Write a snapshot now (reason "request", with this label) and return once
 * it is on disk: 0, or -1 if the shim is inactive or the writer did not
 * answer within 10 s.  Not from a signal handler. */
int memtally_snapshot(const char *label);

/* Record the current value of a progress counter (e.g. "step", 1200).
 * Every later snapshot carries the latest value of each mark (up to 8
 * names of up to 31 bytes), so `memtally leaks` can give growth per step.
 * With MEMTALLY_STEPS=N, a "step" mark that reaches a multiple of N asks
 * for a snapshot (reason "step"), written by memtally's own thread while
 * the caller goes on.
 * Lock-free and allocation-free: safe to call every iteration.  Returns 0,
 * or -1 when the name table is full or the name is empty. */
int memtally_mark(const char *name, double value);

#ifdef __cplusplus
}
#endif
#endif
