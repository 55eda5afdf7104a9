/*
 * all_gpus.cu — module3/single-process.
 *
 * This is how most people write it the first time. Run it as it is and watch it hang: the
 * check is stopped by its timeout and reported at the run stage. Then find out why and fix
 * both functions. (One of them hangs before the other ever runs.)
 */
#include "single-process.h"

void init_all(int ndev, ncclComm_t *comms) {
  ncclUniqueId id;
  int i;
  MGPU_NCCL(ncclGetUniqueId(&id));
  for (i = 0; i < ndev; i++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_NCCL(ncclCommInitRank(&comms[i], ndev, id, i));
  }
}

void allreduce_all(int ndev, ncclComm_t *comms, float **send, float **recv, size_t n,
                   cudaStream_t *streams) {
  int i;
  for (i = 0; i < ndev; i++)
    MGPU_NCCL(ncclAllReduce(send[i], recv[i], n, ncclFloat, ncclSum, comms[i], streams[i]));
}
