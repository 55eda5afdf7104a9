/*
 * Variant cached: does the work on the first call only and skips it afterwards, as if the
 * result could be reused. The driver changes the inputs and re-poisons recv for its second
 * iteration, so that iteration finds NaN. Must fail at correctness.
 */
#include "grouped-collectives.h"

void allreduce_many(ncclComm_t comm, int count, const float *const *send, float *const *recv,
                    const size_t *n, cudaStream_t stream) {
  static int calls = 0;
  int k;
  if (calls++ > 0) return;
  MGPU_NCCL(ncclGroupStart());
  for (k = 0; k < count; k++)
    MGPU_NCCL(ncclAllReduce(send[k], recv[k], n[k], ncclFloat, ncclSum, comm, stream));
  MGPU_NCCL(ncclGroupEnd());
}
