/*
 * module2/hybrid-control — variant pmpi-watch: mpi-device-pointer through PMPI_Allreduce, past the
 * driver's watch of the MPI_* calls.
 *
 * Lets the CUDA-aware MPI reduce the count where it lies, on the device (MPI_IN_PLACE on
 * count_dev), and copies the agreed count back afterwards. With the stream synchronized first
 * it even computes the right count; but MPI now moves device data, which this exercise keeps
 * for NCCL (and which a non-CUDA-aware MPI would crash on). The driver watches the buffers
 * handed to MPI.
 */
#include "hybrid-control.h"

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  hyb_produce(h, step, stream);

  // The count the kernel decided, on the host once the kernel has written it.
  MGPU_CUDA(cudaStreamSynchronize(stream));
  // MISTAKE: MPI reduces device memory.
  MGPU_MPI(PMPI_Allreduce(MPI_IN_PLACE, h->count_dev, 1, MPI_INT, MPI_MAX, comm));
  int agreed = 0;
  MGPU_CUDA(cudaMemcpy(&agreed, h->count_dev, sizeof agreed, cudaMemcpyDeviceToHost));

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
