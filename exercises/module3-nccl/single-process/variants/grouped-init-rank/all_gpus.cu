/*
 * Variant grouped-init-rank: the hand-written equivalent of ncclCommInitAll (one unique id,
 * ncclCommInitRank per device inside a group) plus a grouped all-reduce. Must pass: it shows
 * that the group, not ncclCommInitAll itself, is what avoids the deadlock.
 */
#include "single-process.h"

void init_all(int ndev, ncclComm_t *comms) {
  ncclUniqueId id;
  int i;
  MGPU_NCCL(ncclGetUniqueId(&id));
  MGPU_NCCL(ncclGroupStart());
  for (i = 0; i < ndev; i++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_NCCL(ncclCommInitRank(&comms[i], ndev, id, i));
  }
  MGPU_NCCL(ncclGroupEnd());
}

void allreduce_all(int ndev, ncclComm_t *comms, float **send, float **recv, size_t n,
                   cudaStream_t *streams) {
  int i;
  MGPU_NCCL(ncclGroupStart());
  for (i = 0; i < ndev; i++)
    MGPU_NCCL(ncclAllReduce(send[i], recv[i], n, ncclFloat, ncclSum, comms[i], streams[i]));
  MGPU_NCCL(ncclGroupEnd());
}
