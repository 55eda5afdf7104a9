/*
 * Variant max-op: the right call with the wrong reduction (ncclMax instead of ncclSum). Every
 * rank gets the same answer, just not the sum. Must fail at correctness.
 */
#include "init-allreduce.h"

ncclComm_t make_comm(int rank, int world, const ncclUniqueId *id) {
  ncclComm_t comm = NULL;
  MGPU_NCCL(ncclCommInitRank(&comm, world, *id, rank));
  return comm;
}

void allreduce_sum(ncclComm_t comm, const float *send, float *recv, size_t n,
                   cudaStream_t stream) {
  MGPU_NCCL(ncclAllReduce(send, recv, n, ncclFloat, ncclMax, comm, stream));
}
