// module2/mpi-vs-nccl — variant comm-id-env: nccl_from_mpi never sends the unique id through
// MPI. Every rank sets NCCL_COMM_ID to the same fixed address first, so every rank's own
// ncclGetUniqueId returns the same bytes and rank 0's ncclCommInitRank opens the bootstrap
// there. The communicator is right (size, ranks, device), the sums too: only the policy can see
// that MPI did not carry the id. On several nodes, or with that port taken, it breaks.
#include <stdlib.h>

#include "mpi-vs-nccl.h"

void mpi_sum(const float *send, float *recv, size_t n, cudaStream_t stream, MPI_Comm comm) {
  MGPU_CUDA(cudaStreamSynchronize(stream));
  MGPU_MPI(MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, comm));
}

ncclComm_t nccl_from_mpi(MPI_Comm comm) {
  int rank = 0, size = 0;
  MGPU_MPI(MPI_Comm_rank(comm, &rank));
  MGPU_MPI(MPI_Comm_size(comm, &size));
  setenv("NCCL_COMM_ID", "127.0.0.1:29517", 1);
  ncclUniqueId id;
  MGPU_NCCL(ncclGetUniqueId(&id)); // every rank: the same bytes, from the same address
  ncclComm_t nccl = nullptr;
  MGPU_NCCL(ncclCommInitRank(&nccl, size, id, rank));
  unsetenv("NCCL_COMM_ID");
  return nccl;
}

void nccl_sum(ncclComm_t nccl, const float *send, float *recv, size_t n, cudaStream_t stream) {
  MGPU_NCCL(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, nccl, stream));
}
