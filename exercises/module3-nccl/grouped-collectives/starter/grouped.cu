/*
 * grouped.cu — module3/grouped-collectives.
 *
 * This version is correct, and it is exactly the baseline the checker times yours against, so
 * it fails the performance stage. Make the same collectives cost less. You may not change
 * what is computed: every recv[k] must still be the sum of every rank's send[k].
 */
#include "grouped-collectives.h"

void allreduce_many(ncclComm_t comm, int count, const float *const *send, float *const *recv,
                    const size_t *n, cudaStream_t stream) {
  int k;
  for (k = 0; k < count; k++)
    MGPU_NCCL(ncclAllReduce(send[k], recv[k], n[k], ncclFloat, ncclSum, comm, stream));
}
