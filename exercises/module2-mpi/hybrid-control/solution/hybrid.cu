/*
 * hybrid.cu — reference solution for module2/hybrid-control.
 *
 * The rules this step follows:
 *   - a value the GPU computes is on the host only after the stream has finished: copy it on
 *     the stream, then synchronize (a plain cudaMemcpy runs on the legacy default stream, which
 *     does not wait for a non-blocking stream);
 *   - MPI gets host memory only, and only small control values;
 *   - NCCL calls go on the same stream as the kernels: queued after hyb_produce, before
 *     hyb_consume, they are ordered without any host synchronization;
 *   - the host waits once per step, for the count; everything after it is queued.
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
