/*
 * Variant group-per-call: wraps each call in its own ncclGroupStart/ncclGroupEnd. Correct,
 * and no faster than no group at all: a group only aggregates what is inside it. Must fail at
 * performance.
 */
#include "grouped-collectives.h"

void allreduce_many(ncclComm_t comm, int count, const float *const *send, float *const *recv,
                    const size_t *n, cudaStream_t stream) {
  int k;
  for (k = 0; k < count; k++) {
    MGPU_NCCL(ncclGroupStart());
    MGPU_NCCL(ncclAllReduce(send[k], recv[k], n[k], ncclFloat, ncclSum, comm, stream));
    MGPU_NCCL(ncclGroupEnd());
  }
}
