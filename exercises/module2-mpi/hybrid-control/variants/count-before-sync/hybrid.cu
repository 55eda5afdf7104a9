/*
 * hybrid.cu — variant count-before-sync of module2/hybrid-control (a planted mistake).
 *
 * Copies the count with a plain cudaMemcpy right after hyb_produce, "because cudaMemcpy is
 * synchronous". It is synchronous for the host, and it runs on the legacy default stream,
 * which does not wait for a non-blocking stream: it reads count_dev before the produce kernel
 * has written it, so every step agrees on the previous step's count. The driver makes the
 * produce kernel start 20 ms late, so this happens at every step, not once in a while.
 */
#include "hybrid-control.h"

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  hyb_produce(h, step, stream);

  // The count the kernel decided, on the host once the kernel has written it.
  int mine = 0;
  // MISTAKE: does not wait for `stream`; the legacy default stream does not either.
  MGPU_CUDA(cudaMemcpy(&mine, h->count_dev, sizeof mine, cudaMemcpyDeviceToHost));

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
