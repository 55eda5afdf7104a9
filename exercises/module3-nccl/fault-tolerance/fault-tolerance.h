/*
 * fault-tolerance.h — the functions you write for module3/fault-tolerance (course-owned: do
 * not edit). One process per GPU; the driver owns main(). During the run one rank is killed
 * (SIGKILL) by the course's fault plan; the others must notice, give up cleanly and report.
 */
#ifndef MODULE3_FAULT_TOLERANCE_H
#define MODULE3_FAULT_TOLERANCE_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"

/* Return value of your functions when a deadline passed before NCCL reported anything. */
#define FT_TIMED_OUT (-1)

#ifdef __cplusplus
extern "C" {
#endif

/* Create this rank's communicator (world ranks, this one is `rank`, from unique id *id) and
 * wait until it is ready, for at most timeout_ms. Return 0 with *comm set, or an error: an
 * ncclResult_t value other than ncclSuccess, or FT_TIMED_OUT. On error leave nothing behind
 * (abort what you created) and set *comm to NULL. The current device is this rank's GPU. */
int ft_make_comm(int rank, int world, const ncclUniqueId *id, int timeout_ms, ncclComm_t *comm);

/* Run `iters` all-reduces (sum) of n floats from send into recv on `stream`, one at a time:
 * each must have completed on the GPU before the next is issued, and each gets at most
 * timeout_ms from its call to its completion. Set *completed to the number that completed.
 * Return 0 when all did. When anything goes wrong (an NCCL error, an asynchronous error of the
 * communicator, a CUDA error, a deadline), abort the communicator so that nothing of it is
 * left running on the GPU, and return the error (ncclResult_t value or FT_TIMED_OUT). After an
 * error the communicator is gone; the driver will not use it again. */
int ft_allreduce_loop(ncclComm_t comm, const float *send, float *recv, size_t n, int iters,
                      int timeout_ms, cudaStream_t stream, int *completed);

#ifdef __cplusplus
}
#endif

#endif /* MODULE3_FAULT_TOLERANCE_H */
