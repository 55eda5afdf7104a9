/*
 * collectives.cu — module2/mpi-vs-nccl. Write the three functions below; mpi-vs-nccl.h says
 * what the driver expects from each. Wrap MPI calls in MGPU_MPI(...), NCCL calls in
 * MGPU_NCCL(...), CUDA calls in MGPU_CUDA(...).
 */
#include "mpi-vs-nccl.h"

void mpi_sum(const float *send, float *recv, size_t n, cudaStream_t stream, MPI_Comm comm) {
  /* TODO: one MPI collective on the device pointers. But first: `send` is being written by
   * work on `stream`, and MPI does not know about streams. */
  (void)send;
  (void)recv;
  (void)n;
  (void)stream;
  (void)comm;
}

ncclComm_t nccl_from_mpi(MPI_Comm comm) {
  /* TODO: rank 0 of comm makes an ncclUniqueId, every rank gets the same bytes (an MPI
   * collective), every rank joins with ncclCommInitRank using its MPI rank and size. */
  (void)comm;
  return NULL;
}

void nccl_sum(ncclComm_t nccl, const float *send, float *recv, size_t n, cudaStream_t stream) {
  /* TODO: one NCCL call, enqueued on `stream`. */
  (void)nccl;
  (void)send;
  (void)recv;
  (void)n;
  (void)stream;
}
