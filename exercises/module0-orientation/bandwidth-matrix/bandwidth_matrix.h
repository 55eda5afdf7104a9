/*
 * bandwidth_matrix.h: the function module0/bandwidth-matrix asks you to write. Course-owned:
 * the driver includes it too, so do not change it. It brings in the CUDA runtime and the
 * harness (MGPU_CUDA checks a CUDA call and stops the run with the call, file and line if it
 * fails).
 */
#ifndef MODULE0_BANDWIDTH_MATRIX_H
#define MODULE0_BANDWIDTH_MATRIX_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "mgpu.h"

/* Measures the copy bandwidth between every ordered pair of devices 0..n-1, copying `bytes`
 * bytes per copy, and fills (row-major, n×n, GB/s = 1e9 bytes per second):
 *   uni[i*n + j]    copies from device i to device j alone;
 *   bidir[i*n + j]  copies i -> j and j -> i running at the same time: the sum of both
 *                   directions' bytes per second (so bidir[i*n+j] == bidir[j*n+i]);
 * with 0 on both diagonals, and the ordered pair (i -> j, i != j) whose uni figure is lowest in
 * *slowest_src, *slowest_dst. Allocate whatever buffers you need, and free them before
 * returning. */
void bandwidth_matrix(int n, size_t bytes, double *uni, double *bidir, int *slowest_src,
                      int *slowest_dst);

#endif
