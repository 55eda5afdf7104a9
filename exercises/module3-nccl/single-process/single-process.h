/*
 * single-process.h — the functions you write for module3/single-process (course-owned: do not
 * edit). One process drives every GPU of the machine; the driver owns main().
 */
#ifndef MODULE3_SINGLE_PROCESS_H
#define MODULE3_SINGLE_PROCESS_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Create one communicator per GPU: comms[i] is rank i and uses CUDA device i, for i < ndev.
 * comms points to ndev slots. */
void init_all(int ndev, ncclComm_t *comms);

/* For every device i < ndev: recv[i][k] = sum over devices j of send[j][k], for k < n.
 * send[i], recv[i] and streams[i] live on device i. Enqueue the work on streams[i] and return
 * without waiting: the driver reads recv[i] on streams[i]. */
void allreduce_all(int ndev, ncclComm_t *comms, float **send, float **recv, size_t n,
                   cudaStream_t *streams);

#ifdef __cplusplus
}
#endif

#endif /* MODULE3_SINGLE_PROCESS_H */
