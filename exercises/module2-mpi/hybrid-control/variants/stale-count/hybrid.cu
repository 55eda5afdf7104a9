/*
 * hybrid.cu — variant stale-count of module2/hybrid-control (a planted mistake).
 *
 * Reads the count first and produces the message after, with the synchronization right: the
 * value it reads is what count_dev held before this step's kernel, the previous step's count.
 * Every step agrees on a stale count; at every other step that is too short and data is lost.
 */
#include "hybrid-control.h"

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  // MISTAKE: the count is read before this step's produce kernel is even queued.
  int mine = 0;
  MGPU_CUDA(cudaMemcpyAsync(&mine, h->count_dev, sizeof mine, cudaMemcpyDeviceToHost, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
  hyb_produce(h, step, stream);

  // Control: every rank learns the longest message of the step.
  int agreed = 0;
  MGPU_MPI(MPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, comm));

  // Data: the ring shift, both directions in one group so neither call waits for the other.
  if (agreed > 0) {
    const int next = (h->rank + 1) % h->world;
    const int prev = (h->rank - 1 + h->world) % h->world;
    MGPU_NCCL(ncclGroupStart());
    MGPU_NCCL(ncclSend(h->send, (size_t)agreed, ncclFloat, next, nccl, stream));
    MGPU_NCCL(ncclRecv(h->recv, (size_t)agreed, ncclFloat, prev, nccl, stream));
    MGPU_NCCL(ncclGroupEnd());
  }
  hyb_consume(h, agreed, stream); // after the receive, on the same stream
  return agreed;
}
