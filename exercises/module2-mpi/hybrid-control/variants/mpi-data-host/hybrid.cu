// module2/hybrid-control — variant mpi-data-host: the count right, but the data goes round the
// ring by MPI, staged through host buffers (copy send to the host, MPI_Sendrecv, copy back into
// recv), not by NCCL. MPI is never handed a device pointer, so the device-pointer watch sees
// nothing, and the totals are exact. The driver's watch now also counts the bytes MPI carries
// in a step: far more than a count.
#include <stdlib.h>

#include "hybrid-control.h"

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  (void)nccl;
  hyb_produce(h, step, stream);
  int mine = 0;
  MGPU_CUDA(cudaMemcpyAsync(&mine, h->count_dev, sizeof mine, cudaMemcpyDeviceToHost, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
  int agreed = 0;
  MGPU_MPI(MPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, comm));
  if (agreed > 0) {
    const int next = (h->rank + 1) % h->world;
    const int prev = (h->rank - 1 + h->world) % h->world;
    const size_t bytes = (size_t)agreed * sizeof(float);
    float *out = (float *)malloc(bytes), *in = (float *)malloc(bytes);
    MGPU_CUDA(cudaMemcpyAsync(out, h->send, bytes, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    MGPU_MPI(MPI_Sendrecv(out, agreed, MPI_FLOAT, next, 7, in, agreed, MPI_FLOAT, prev, 7, comm,
                          MPI_STATUS_IGNORE));
    MGPU_CUDA(cudaMemcpyAsync(h->recv, in, bytes, cudaMemcpyHostToDevice, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    free(out);
    free(in);
  }
  hyb_consume(h, agreed, stream);
  return agreed;
}
