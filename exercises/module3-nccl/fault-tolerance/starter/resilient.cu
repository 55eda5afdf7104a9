/*
 * resilient.cu — module3/fault-tolerance.
 *
 * This version works while every rank is alive, and passes the "healthy" case. Then the fault
 * plan kills one rank, and the survivors wait for it forever: cudaStreamSynchronize has no
 * timeout, and a blocking communicator gives you nowhere to put one. The check stops them at
 * its timeout and reports a hang at the run stage.
 *
 * Make it give up: a non-blocking communicator (ncclConfig_t, blocking = 0), polling instead
 * of waiting, ncclCommGetAsyncError, a deadline, and ncclCommAbort. The header says exactly
 * what each function must return.
 */
#include "fault-tolerance.h"

int ft_make_comm(int rank, int world, const ncclUniqueId *id, int timeout_ms,
                 ncclComm_t *comm) {
  (void)timeout_ms;
  MGPU_NCCL(ncclCommInitRank(comm, world, *id, rank));
  return 0;
}

int ft_allreduce_loop(ncclComm_t comm, const float *send, float *recv, size_t n, int iters,
                      int timeout_ms, cudaStream_t stream, int *completed) {
  (void)timeout_ms;
  *completed = 0;
  for (int i = 0; i < iters; i++) {
    MGPU_NCCL(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    *completed = i + 1;
  }
  return 0;
}
