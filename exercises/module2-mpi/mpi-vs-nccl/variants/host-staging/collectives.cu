/*
 * collectives.cu — variant host-staging of module2/mpi-vs-nccl (a planted mistake).
 *
 * Copies `send` to host memory, all-reduces the host copy, copies the sum back: right, and
 * what a program does with an MPI that is not CUDA-aware. With a CUDA-aware MPI it is work the
 * library does itself (and the copies it does are the thing this exercise measures), so the
 * exercise forbids cudaMemcpy in your file: the policy stage refuses it.
 */
#include <stdlib.h>

#include "mpi-vs-nccl.h"

void mpi_sum(const float *send, float *recv, size_t n, cudaStream_t stream, MPI_Comm comm) {
  // `send` is written by work on `stream` (a fill kernel, an NCCL all-reduce). MPI reads the
  // device memory itself, outside any stream: that work must be finished first.
  MGPU_CUDA(cudaStreamSynchronize(stream));
  // MISTAKE: stages through host memory by hand.
  float *host = static_cast<float *>(malloc(n * sizeof(float)));
  if (host == nullptr) mgpu_fail("learner", "malloc", __FILE__, __LINE__, 0, "out of memory");
  MGPU_CUDA(cudaMemcpy(host, send, n * sizeof(float), cudaMemcpyDeviceToHost));
  MGPU_MPI(MPI_Allreduce(MPI_IN_PLACE, host, (int)n, MPI_FLOAT, MPI_SUM, comm));
  MGPU_CUDA(cudaMemcpy(recv, host, n * sizeof(float), cudaMemcpyHostToDevice));
  free(host);
}

ncclComm_t nccl_from_mpi(MPI_Comm comm) {
  int rank = 0, size = 0;
  MGPU_MPI(MPI_Comm_rank(comm, &rank));
  MGPU_MPI(MPI_Comm_size(comm, &size));
  // One id for the whole communicator: made once, by rank 0, and sent to everyone. The id is
  // 128 opaque bytes (the address of rank 0's bootstrap listener, among others).
  ncclUniqueId id;
  if (rank == 0) MGPU_NCCL(ncclGetUniqueId(&id));
  MGPU_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm));
  // Collective: returns when all `size` ranks have joined. Same rank numbers as MPI's, so that
  // a rank means the same process to both libraries. The current device is this rank's GPU.
  ncclComm_t nccl = nullptr;
  MGPU_NCCL(ncclCommInitRank(&nccl, size, id, rank));
  return nccl;
}

void nccl_sum(ncclComm_t nccl, const float *send, float *recv, size_t n, cudaStream_t stream) {
  // Ordered on the stream after the work that wrote `send`, before whatever comes next there.
  MGPU_NCCL(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, nccl, stream));
}
