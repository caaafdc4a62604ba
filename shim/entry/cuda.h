/*
 * cuda.h — CUDA driver allocations (cuda.c), reached three ways: the
 * exported entry points (programs linked with -lcuda), dlsym on the
 * driver's handle (cudart, NCCL, cuBLAS, PyTorch, XLA), and
 * cuGetProcAddress[_v2] including its self-lookup.
 * Rules: never calls malloc; wrappers run in the program's threads with
 * the re-entry guard held around the driver call and the recording.
 */
#ifndef MT_CUDA_H
#define MT_CUDA_H
#include <stdint.h>

/* Read the routes (MEMTALLY_CUDA_ROUTES) and install the dlsym filter, at
 * start.  The per-device figures are devices.h. */
void mt_cuda_init(void);

#endif
