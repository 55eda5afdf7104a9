/*
 * timing.h: the function module0/timing asks you to write. Course-owned: the driver includes
 * it too, so do not change it. It brings in the CUDA runtime and the harness (MGPU_CUDA checks
 * a CUDA call and stops the run with the call, file and line if it fails).
 */
#ifndef MODULE0_TIMING_H
#define MODULE0_TIMING_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "mgpu.h"

/* An operation: each call queues one device-to-device copy of the same `bytes` on `stream` and
 * returns at once, before the copy has run (like every asynchronous CUDA call). */
typedef void (*copy_op)(void *arg, cudaStream_t stream);

/* Measures how fast op copies, and returns it in GB/s: bytes copied per second / 1e9, each
 * copy counting `bytes` once. Call op(arg, stream) as many times as you need. */
double time_copy_gbps(copy_op op, void *arg, size_t bytes, cudaStream_t stream);

#endif
