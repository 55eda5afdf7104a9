/*
 * alpha_beta.h: the function module0/alpha-beta asks you to write. Course-owned: the driver
 * includes it too, so do not change it. It brings in the CUDA runtime and the harness
 * (MGPU_CUDA checks a CUDA call and stops the run with the call, file and line if it fails).
 */
#ifndef MODULE0_ALPHA_BETA_H
#define MODULE0_ALPHA_BETA_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "mgpu.h"

/* An operation: each call queues one copy of `bytes` bytes (1 <= bytes <= the max_bytes you
 * were given) from GPU 0 to GPU 1 on `stream`, and returns at once, before the copy has run. */
typedef void (*sized_copy_op)(void *arg, size_t bytes, cudaStream_t stream);

/* Times op at every power-of-two size from 8 bytes to max_bytes, fits t(n) = alpha + n / beta
 * to the times by least squares, and returns alpha in microseconds and beta in GB/s
 * (1e9 bytes per second). task.md says exactly how to time and fit. */
void fit_alpha_beta(sized_copy_op op, void *arg, size_t max_bytes, cudaStream_t stream,
                    double *alpha_us, double *beta_gbps);

#endif
