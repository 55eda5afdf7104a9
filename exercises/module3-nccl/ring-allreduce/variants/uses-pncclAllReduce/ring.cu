/*
 * Variant uses-pncclAllReduce: hands the whole job to NCCL through the profiling name of the
 * collective. nccl.h declares a p-prefixed twin of every API call (pncclAllReduce is the same
 * function as ncclAllReduce), so this needs no dlsym and no trick: it is one grep of nccl.h
 * away. Correct and as fast as the baseline. Must fail at the policy stage, like
 * uses-ncclAllReduce; it does only if the forbid list (or the policy's matcher) also covers
 * the p-prefixed names.
 */
#include "ring-allreduce.h"

void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream) {
  (void)rank;
  (void)world;
  (void)scratch;
  MGPU_NCCL(pncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, stream));
}
