/*
 * hybrid.cu — module2/hybrid-control, variant count-by-nccl-send: the ranks agree on the count
 * without MPI. Every rank sends its device count to every other rank with ncclSend/ncclRecv
 * (the collectives are forbidden, point-to-point is not), copies the counts to the host and
 * takes the largest. The totals come out right, and MPI is handed nothing at all: the driver
 * now fails a step in which MPI carried nothing.
 */
#include <stdlib.h>

#include "hybrid-control.h"

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  (void)comm;
  hyb_produce(h, step, stream);

  int *counts_dev = NULL;
  MGPU_CUDA(cudaMallocAsync((void **)&counts_dev, sizeof(int) * (size_t)h->world, stream));
  MGPU_CUDA(cudaMemcpyAsync(counts_dev + h->rank, h->count_dev, sizeof(int), cudaMemcpyDeviceToDevice, stream));
  MGPU_NCCL(ncclGroupStart());
  for (int p = 0; p < h->world; p++) {
    if (p == h->rank) continue;
    MGPU_NCCL(ncclSend(h->count_dev, 1, ncclInt32, p, nccl, stream));
    MGPU_NCCL(ncclRecv(counts_dev + p, 1, ncclInt32, p, nccl, stream));
  }
  MGPU_NCCL(ncclGroupEnd());
  int *counts = (int *)malloc(sizeof(int) * (size_t)h->world);
  if (!counts) return 0;
  MGPU_CUDA(cudaMemcpyAsync(counts, counts_dev, sizeof(int) * (size_t)h->world, cudaMemcpyDeviceToHost, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
  MGPU_CUDA(cudaFreeAsync(counts_dev, stream));
  int agreed = 0;
  for (int p = 0; p < h->world; p++)
    if (counts[p] > agreed) agreed = counts[p];
  free(counts);

  if (agreed > 0) {
    const int next = (h->rank + 1) % h->world;
    const int prev = (h->rank - 1 + h->world) % h->world;
    MGPU_NCCL(ncclGroupStart());
    MGPU_NCCL(ncclSend(h->send, (size_t)agreed, ncclFloat, next, nccl, stream));
    MGPU_NCCL(ncclRecv(h->recv, (size_t)agreed, ncclFloat, prev, nccl, stream));
    MGPU_NCCL(ncclGroupEnd());
  }
  hyb_consume(h, agreed, stream);
  return agreed;
}
