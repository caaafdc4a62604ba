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

#ifdef __cplusplus
}
#endif
#endif
