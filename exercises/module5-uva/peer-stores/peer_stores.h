/*
 * peer_stores.h: the function module5/peer-stores asks you to write. Course-owned: the driver
 * includes it too, so do not change it.
 */
#ifndef MODULE5_PEER_STORES_H
#define MODULE5_PEER_STORES_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies `bytes` bytes (1 and up, any count) from `src`, memory of the current GPU, to `dst`,
 * memory of another GPU that this one reaches through peer access (already enabled; on a
 * machine with one GPU, dst is on the same GPU). The bytes must be moved by a kernel of yours
 * running on the current GPU: its threads load src and store into dst. No copy engine.
 * dst and src have the same address modulo 16 (both may be misaligned by the same amount).
 * `stream` is a stream of the current GPU: the copy starts after the work queued on it before
 * the call (it writes src), and work queued on it after the call sees every byte in dst.
 * Return without waiting. Write nothing outside dst[0..bytes). */
void sm_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE5_PEER_STORES_H */
