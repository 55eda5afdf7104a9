/*
 * ring-allreduce.h — the function you write for module3/ring-allreduce (course-owned: do not
 * edit). One process per GPU; the driver owns main() and the communicator.
 */
#ifndef MODULE3_RING_ALLREDUCE_H
#define MODULE3_RING_ALLREDUCE_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"

/* Floats in the scratch buffer the driver passes for a given n: room for two chunks of
 * ceil(n / world) rounded up to 64 floats, on any world size >= 2. */
#define RING_SCRATCH_ELEMS(n) ((size_t)(n) + 256)

#ifdef __cplusplus
extern "C" {
#endif

/* recv[i] = the sum over all ranks of their send[i], for i < n, on every rank — built from
 * ncclSend/ncclRecv and your own reduction kernel; NCCL's collectives are off limits.
 * `rank` and `world` are this rank and the communicator's size. send and recv are distinct
 * buffers of n floats; do not write to send. scratch has RING_SCRATCH_ELEMS(n) floats that are
 * yours during the call (their content on entry is garbage).
 * Enqueue the work so that it is ordered after earlier work on `stream` and before later work
 * on `stream`; return without waiting. The driver reads recv on `stream`. */
void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE3_RING_ALLREDUCE_H */
