/*
 * hybrid.cu — variant mirror-neighbour of module2/hybrid-control (a planted mistake).
 *
 * Sends to and receives from "the other rank", world - 1 - rank: on two ranks that is both
 * neighbours of the ring, and the variant passes. On three, rank 1 exchanges with itself and
 * rank 2 receives from rank 0; on four, 0 pairs with 3 and 1 with 2. Every send has its
 * receive, so nothing hangs: the totals are made of the wrong rank's messages. The expectation
 * is for a run on 3 or more GPUs.
 */
#include "hybrid-control.h"

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  hyb_produce(h, step, stream);

  // The count the kernel decided, on the host once the kernel has written it.
  int mine = 0;
  MGPU_CUDA(cudaMemcpyAsync(&mine, h->count_dev, sizeof mine, cudaMemcpyDeviceToHost, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));

  // Control: every rank learns the longest message of the step.
  int agreed = 0;
  MGPU_MPI(MPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, comm));

  // Data: the ring shift, both directions in one group so neither call waits for the other.
  if (agreed > 0) {
    const int next = h->world - 1 - h->rank; // MISTAKE: "the other rank"
    const int prev = h->world - 1 - h->rank;
    MGPU_NCCL(ncclGroupStart());
    MGPU_NCCL(ncclSend(h->send, (size_t)agreed, ncclFloat, next, nccl, stream));
    MGPU_NCCL(ncclRecv(h->recv, (size_t)agreed, ncclFloat, prev, nccl, stream));
    MGPU_NCCL(ncclGroupEnd());
  }
  hyb_consume(h, agreed, stream); // after the receive, on the same stream
  return agreed;
}
