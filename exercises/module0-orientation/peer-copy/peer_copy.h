/*
 * peer_copy.h: the two functions module0/peer-copy asks you to write. Course-owned: the driver
 * includes it too, so do not change it. It brings in the CUDA runtime and the harness
 * (MGPU_CUDA checks a CUDA call and stops the run with the call, file and line if it fails).
 */
#ifndef MODULE0_PEER_COPY_H
#define MODULE0_PEER_COPY_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "mgpu.h"

/* Called once, before any copy: prepare this process to copy between devices src_dev and
 * dst_dev as fast as the machine allows. */
void peer_copy_setup(int src_dev, int dst_dev);

/* Queues a copy of `bytes` bytes from `src` (memory of device src_dev) to `dst` (memory of
 * device dst_dev) on `stream`, a stream of device src_dev, and returns without waiting for it.
 * The copy must be ordered on `stream`: it starts after the work queued on `stream` before it,
 * and work queued on `stream` after it sees the copied bytes. */
void peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes,
               cudaStream_t stream);

#endif
