/*
 * devices.h: the two functions module0/devices asks you to write. Course-owned: the driver
 * includes it too, so do not change it. It brings in the CUDA runtime and the harness
 * (MGPU_CUDA checks a CUDA call and stops the run with the call, file and line if it fails).
 */
#ifndef MODULE0_DEVICES_H
#define MODULE0_DEVICES_H

#include <cuda_runtime.h>

#include "mgpu.h"

/* The number of CUDA devices this process can see. */
int gpu_count(void);

/* Fills the n×n matrix can_access, row-major: can_access[i * n + j] = 1 when device i can
 * reach device j's memory directly (peer access is possible), else 0, for devices 0..n-1.
 * A device always reaches its own memory, so the diagonal is 1. Write exactly the first n*n
 * entries: n may be smaller than the number of devices. */
void peer_access_matrix(int n, int *can_access);

#endif
