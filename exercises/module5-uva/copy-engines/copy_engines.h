/*
 * copy_engines.h: the function module5/copy-engines asks you to write. Course-owned: the
 * driver includes it too, so do not change it.
 *
 * One process drives a pair of GPUs, A and B (peer access is already enabled both ways).
 */
#ifndef MODULE5_COPY_ENGINES_H
#define MODULE5_COPY_ENGINES_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Queues two copies that run at the same time, one in each direction of the link:
 *   n_ab bytes from a_src (memory of device dev_a) to b_dst (memory of device dev_b), and
 *   n_ba bytes from b_src (memory of dev_b)        to a_dst (memory of dev_a).
 * Sizes are anything from 1 byte up, and the two need not be equal. Use the copy engines
 * (cudaMemcpyPeerAsync / cudaMemcpyAsync), not kernels.
 * `stream` is a stream of dev_a. Both copies start after the work queued on `stream` before
 * the call (it writes both sources), and work queued on `stream` after the call sees both
 * copies complete. Return without waiting: no synchronization inside. dev_a == dev_b is
 * possible (a machine with one GPU): the same code must work. Leave the current device as
 * you found it. */
void exchange(void *b_dst, const void *a_src, size_t n_ab, void *a_dst, const void *b_src,
              size_t n_ba, int dev_a, int dev_b, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE5_COPY_ENGINES_H */
