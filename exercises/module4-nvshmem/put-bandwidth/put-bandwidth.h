/*
 * put-bandwidth.h — what you write for module4/put-bandwidth (course-owned: do not edit).
 *
 * One process per GPU, each one NVSHMEM PE; the driver starts NVSHMEM, owns the buffers and
 * times your put against a copy-engine copy of the same bytes.
 */
#ifndef MODULE4_PUT_BANDWIDTH_H
#define MODULE4_PUT_BANDWIDTH_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copy `bytes` bytes (any count from 1 up, not a multiple of anything) from `src`, ordinary
 * device memory of this PE, into `dst` on PE `peer`. `dst` is symmetric: the driver allocated
 * it with nvshmem_malloc, so this PE's pointer names the peer's copy too. The transfer must
 * be done by your kernel (NVSHMEM puts issued by GPU threads).
 * Enqueue on `stream`: the transfer starts after the work queued before it on `stream` (which
 * writes src) and, by the time `stream` passes your work, every byte has arrived in the peer's
 * dst. Return without waiting. Write nothing outside dst[0..bytes) and do not write src. */
void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE4_PUT_BANDWIDTH_H */
