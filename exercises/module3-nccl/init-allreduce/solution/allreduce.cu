/*
 * allreduce.cu — reference solution for module3/init-allreduce.
 */
#include "init-allreduce.h"

ncclComm_t make_comm(int rank, int world, const ncclUniqueId *id) {
  ncclComm_t comm = NULL;
  /* Blocks until all `world` ranks have called it with the same id. The device is already
   * selected (the driver did it), and NCCL binds the communicator to the current device. */
  MGPU_NCCL(ncclCommInitRank(&comm, world, *id, rank));
  return comm;
}

void allreduce_sum(ncclComm_t comm, const float *send, float *recv, size_t n,
                   cudaStream_t stream) {
  /* Enqueued on `stream`; returns before the data has moved. */
  MGPU_NCCL(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, stream));
}
