/*
 * overlap.cu — variant uses-nccl of module2/jacobi-overlap (a planted mistake).
 *
 * Correct, but the halos travel by NCCL: a communicator bootstrapped from MPI
 * (rank 0's unique id through MPI_Bcast), ncclSend/ncclRecv on the stream, ordered with the
 * kernels without any host synchronization. A fine design, and not this exercise: it is about
 * non-blocking MPI, and the policy stage refuses ncclSend.
 */
#include <nccl.h>

#include "jacobi-overlap.h"

namespace {
ncclComm_t g_nccl = nullptr;
} // namespace

void jacobi_overlap(const jac_grid *g, long long first_iter, int iters, cudaStream_t stream,
                    MPI_Comm comm) {
  if (g_nccl == nullptr) {
    ncclUniqueId id;
    if (g->rank == 0) MGPU_NCCL(ncclGetUniqueId(&id));
    MGPU_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm));
    MGPU_NCCL(ncclCommInitRank(&g_nccl, g->world, id, g->rank));
  }
  const int top = g->rank > 0 ? g->rank - 1 : -1;
  const int bottom = g->rank < g->world - 1 ? g->rank + 1 : -1;
  const size_t row = (size_t)g->nx;
  for (long long k = first_iter; k < first_iter + iters; k++) {
    float *in = g->slab[k & 1];
    float *out = g->slab[(k + 1) & 1];
    MGPU_NCCL(ncclGroupStart());
    if (top >= 0) {
      MGPU_NCCL(ncclSend(in + row, row, ncclFloat, top, g_nccl, stream));
      MGPU_NCCL(ncclRecv(in, row, ncclFloat, top, g_nccl, stream));
    }
    if (bottom >= 0) {
      MGPU_NCCL(ncclSend(in + g->rows * row, row, ncclFloat, bottom, g_nccl, stream));
      MGPU_NCCL(ncclRecv(in + (g->rows + 1) * row, row, ncclFloat, bottom, g_nccl, stream));
    }
    MGPU_NCCL(ncclGroupEnd());
    jac_compute(g, in, out, 1, g->rows, stream);
  }
}
