// module2/hybrid-control — variant nccl-count: agrees on the count with NCCL instead of MPI: an
// ncclAllReduce (ncclMax) of count_dev into a device int on the stream, then one copy of the
// result to the host. Right counts, right totals, and no MPI call at all, so the MPI watch has
// nothing to see. The exercise is MPI for control: NCCL's collectives are forbidden.
#include "hybrid-control.h"

static int *g_agreed_dev = nullptr;

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  (void)comm;
  if (g_agreed_dev == nullptr) MGPU_CUDA(cudaMalloc((void **)&g_agreed_dev, sizeof(int)));
  hyb_produce(h, step, stream);
  MGPU_NCCL(ncclAllReduce(h->count_dev, g_agreed_dev, 1, ncclInt, ncclMax, nccl, stream));
  int agreed = 0;
  MGPU_CUDA(cudaMemcpyAsync(&agreed, g_agreed_dev, sizeof agreed, cudaMemcpyDeviceToHost, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
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
