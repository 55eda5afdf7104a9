// module2/hybrid-control — variant send-cap: agrees on the count with MPI as asked and returns
// it, but then moves the whole buffer, h->cap floats, every step whatever the count: the
// entries past the count are zeros, so the totals are exact, and the agreement buys nothing.
// The driver poisons recv before each step and now finds entries past the agreed count written.
#include "hybrid-control.h"

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  hyb_produce(h, step, stream);
  int mine = 0;
  MGPU_CUDA(cudaMemcpyAsync(&mine, h->count_dev, sizeof mine, cudaMemcpyDeviceToHost, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
  int agreed = 0;
  MGPU_MPI(MPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, comm));
  const int next = (h->rank + 1) % h->world;
  const int prev = (h->rank - 1 + h->world) % h->world;
  MGPU_NCCL(ncclGroupStart());
  MGPU_NCCL(ncclSend(h->send, (size_t)h->cap, ncclFloat, next, nccl, stream)); // MISTAKE: cap
  MGPU_NCCL(ncclRecv(h->recv, (size_t)h->cap, ncclFloat, prev, nccl, stream));
  MGPU_NCCL(ncclGroupEnd());
  hyb_consume(h, agreed, stream);
  return agreed;
}
