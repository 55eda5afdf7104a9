/*
 * Variant copy-only: creates the communicator but never communicates; recv gets this rank's
 * own input. Must fail at correctness (the sums are wrong on every rank).
 */
#include "init-allreduce.h"

ncclComm_t make_comm(int rank, int world, const ncclUniqueId *id) {
  ncclComm_t comm = NULL;
  MGPU_NCCL(ncclCommInitRank(&comm, world, *id, rank));
  return comm;
}

void allreduce_sum(ncclComm_t comm, const float *send, float *recv, size_t n,
                   cudaStream_t stream) {
  (void)comm;
  if (send != recv)
    MGPU_CUDA(cudaMemcpyAsync(recv, send, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}
