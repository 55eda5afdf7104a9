/*
 * Variant ungrouped-allreduce: the communicators are right (ncclCommInitAll), the all-reduce
 * loop has no group. The first ncclAllReduce sets up the connections of its communicator
 * (NCCL_RUNTIME_CONNECT=1, pinned in the manifest) and waits for the peers to do the same;
 * they never get the chance. Must hang and fail at the run stage.
 */
#include "single-process.h"

void init_all(int ndev, ncclComm_t *comms) { MGPU_NCCL(ncclCommInitAll(comms, ndev, NULL)); }

void allreduce_all(int ndev, ncclComm_t *comms, float **send, float **recv, size_t n,
                   cudaStream_t *streams) {
  int i;
  for (i = 0; i < ndev; i++)
    MGPU_NCCL(ncclAllReduce(send[i], recv[i], n, ncclFloat, ncclSum, comms[i], streams[i]));
}
