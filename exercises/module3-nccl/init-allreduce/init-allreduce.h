/*
 * init-allreduce.h — the functions you write for module3/init-allreduce (course-owned: do not
 * edit). The driver owns main(): it selects this rank's GPU, shares the unique id that rank 0
 * made, calls your functions, checks every element and destroys the communicator.
 *
 * Include order matters: nccl.h before mgpu.h turns on MGPU_NCCL(call), which checks an
 * ncclResult_t and reports the failing call with its file and line.
 */
#ifndef MODULE3_INIT_ALLREDUCE_H
#define MODULE3_INIT_ALLREDUCE_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Create this rank's communicator: `world` ranks in all, this one is `rank`, joined through the
 * unique id `*id` (the same bytes on every rank). The current CUDA device is already this rank's
 * GPU. Return the communicator; the driver destroys it. */
ncclComm_t make_comm(int rank, int world, const ncclUniqueId *id);

/* recv[i] = the sum over all ranks of their send[i], for i < n, on every rank. Enqueue the work
 * on `stream` and return without waiting for it: the driver reads recv on the same stream.
 * send == recv (in place) must work too. */
void allreduce_sum(ncclComm_t comm, const float *send, float *recv, size_t n,
                   cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE3_INIT_ALLREDUCE_H */
