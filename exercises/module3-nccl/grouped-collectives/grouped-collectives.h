/*
 * grouped-collectives.h — the function you write for module3/grouped-collectives
 * (course-owned: do not edit). One process per GPU; the driver owns main() and the
 * communicator.
 */
#ifndef MODULE3_GROUPED_COLLECTIVES_H
#define MODULE3_GROUPED_COLLECTIVES_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* All-reduce (sum) `count` separate tensors: for every k < count, recv[k][i] = sum over ranks
 * of send[k][i], for i < n[k]. Every rank passes the same count and sizes. Enqueue everything
 * on `stream` and return without waiting; the driver reads recv[k] on `stream`. */
void allreduce_many(ncclComm_t comm, int count, const float *const *send, float *const *recv,
                    const size_t *n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE3_GROUPED_COLLECTIVES_H */
