/*
 * overlap.cu — variant nccl-allgather of module2/jacobi-overlap (a planted mistake).
 *
 * uses-nccl again under names the first forbid list did not hold: the communicator from
 * ncclCommInitRankConfig (not ncclCommInitRank), the halos from one ncclAllGather of every
 * rank's two edge rows (not ncclSend/ncclRecv), copied into place with cudaMemcpyAsync, all on
 * the stream with no host synchronization. Right values, and faster than the blocking MPI
 * baseline without overlapping anything with MPI. The exercise is non-blocking MPI: the policy
 * stage must refuse it.
 */
#include <nccl.h>

#include "jacobi-overlap.h"

namespace {
ncclComm_t g_nccl = nullptr;
float *g_mine = nullptr, *g_all = nullptr;
size_t g_cap = 0;
} // namespace

void jacobi_overlap(const jac_grid *g, long long first_iter, int iters, cudaStream_t stream,
                    MPI_Comm comm) {
  if (g_nccl == nullptr) {
    ncclUniqueId id;
    if (g->rank == 0) MGPU_NCCL(ncclGetUniqueId(&id));
    MGPU_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    MGPU_NCCL(ncclCommInitRankConfig(&g_nccl, g->world, id, g->rank, &cfg));
  }
  const size_t row = (size_t)g->nx, pair = 2 * row;
  if (g_cap < pair) {
    MGPU_CUDA(cudaStreamSynchronize(stream));
    if (g_mine) MGPU_CUDA(cudaFree(g_mine));
    if (g_all) MGPU_CUDA(cudaFree(g_all));
    MGPU_CUDA(cudaMalloc(&g_mine, pair * sizeof(float)));
    MGPU_CUDA(cudaMalloc(&g_all, pair * (size_t)g->world * sizeof(float)));
    g_cap = pair;
  }
  for (long long k = first_iter; k < first_iter + iters; k++) {
    float *in = g->slab[k & 1];
    float *out = g->slab[(k + 1) & 1];
    MGPU_CUDA(cudaMemcpyAsync(g_mine, in + row, row * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    MGPU_CUDA(cudaMemcpyAsync(g_mine + row, in + g->rows * row, row * sizeof(float),
                              cudaMemcpyDeviceToDevice, stream));
    MGPU_NCCL(ncclAllGather(g_mine, g_all, pair, ncclFloat, g_nccl, stream));
    if (g->rank > 0) // the last row of the rank above
      MGPU_CUDA(cudaMemcpyAsync(in, g_all + (g->rank - 1) * pair + row, row * sizeof(float),
                                cudaMemcpyDeviceToDevice, stream));
    if (g->rank < g->world - 1) // the first row of the rank below
      MGPU_CUDA(cudaMemcpyAsync(in + (g->rows + 1) * row, g_all + (g->rank + 1) * pair,
                                row * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    jac_compute(g, in, out, 1, g->rows, stream);
  }
}
