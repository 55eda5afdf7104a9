/*
 * Variant short-count: grouped correctly, but reduces only the first half of each buffer (a
 * bytes-versus-elements slip: the count is halved). The second half of recv keeps the driver's
 * NaN poison. Must fail at correctness with unwritten elements.
 */
#include "single-process.h"

void init_all(int ndev, ncclComm_t *comms) { MGPU_NCCL(ncclCommInitAll(comms, ndev, NULL)); }

void allreduce_all(int ndev, ncclComm_t *comms, float **send, float **recv, size_t n,
                   cudaStream_t *streams) {
  int i;
  MGPU_NCCL(ncclGroupStart());
  for (i = 0; i < ndev; i++)
    MGPU_NCCL(ncclAllReduce(send[i], recv[i], n / 2, ncclFloat, ncclSum, comms[i], streams[i]));
  MGPU_NCCL(ncclGroupEnd());
}
