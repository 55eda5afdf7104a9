/*
 * Variant skip-last: grouped, but the loop stops one tensor short. The last recv keeps the
 * driver's NaN poison. Must fail at correctness with unwritten elements.
 */
#include "grouped-collectives.h"

void allreduce_many(ncclComm_t comm, int count, const float *const *send, float *const *recv,
                    const size_t *n, cudaStream_t stream) {
  int k;
  MGPU_NCCL(ncclGroupStart());
  for (k = 0; k < count - 1; k++)
    MGPU_NCCL(ncclAllReduce(send[k], recv[k], n[k], ncclFloat, ncclSum, comm, stream));
  MGPU_NCCL(ncclGroupEnd());
}
