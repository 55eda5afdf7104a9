/*
 * Variant uses-ncclAllReduce: hands the whole job to NCCL's collective. Correct and fast, and
 * exactly what the exercise forbids. Must fail at the policy stage, naming ncclAllReduce.
 */
#include "ring-allreduce.h"

void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream) {
  (void)rank;
  (void)world;
  (void)scratch;
  MGPU_NCCL(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, stream));
}
