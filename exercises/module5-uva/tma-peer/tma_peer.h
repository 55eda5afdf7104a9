/*
 * tma_peer.h: the function module5/tma-peer asks you to write. Course-owned: the driver
 * includes it too, so do not change it.
 */
#ifndef MODULE5_TMA_PEER_H
#define MODULE5_TMA_PEER_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies `bytes` bytes (1 and up) from `src`, memory of the current GPU, to `dst`, memory of
 * the next GPU (peer access is on; with one GPU, the same GPU), with Hopper's bulk copies
 * (cp.async.bulk, the TMA unit): global -> shared -> peer global, issued by your kernel.
 * dst and src have the same address modulo 16.
 *
 * Your work is confined to `sms` SMs: when tma_copy is called, the current context is a green
 * context of the current GPU that holds `sms` SMs, and `stream` belongs to it. Kernels you
 * launch from here run on those SMs only. Launch on `stream`; do not change the current device
 * or context and start no threads (the policy stage and the driver check both).
 * Ordering as usual: the copy starts after the work queued on `stream` before the call, and
 * work queued after it sees every byte. Return without waiting; write nothing outside
 * dst[0..bytes). */
void tma_copy(void *dst, const void *src, size_t bytes, int sms, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE5_TMA_PEER_H */
