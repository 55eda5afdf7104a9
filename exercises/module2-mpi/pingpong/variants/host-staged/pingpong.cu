// module2/pingpong — variant host-staged: correct, but every message goes device -> host ->
// MPI (host buffers) -> host -> device, as it must with an MPI that is not CUDA-aware. Pinned
// staging buffers are kept between calls, so what is slow is the staging itself: two PCIe
// copies and a host-to-host MPI transfer per message instead of one GPU-to-GPU copy.
#include <stdint.h>

#include "pingpong.h"

static void *g_out, *g_in;
static size_t g_cap;

static void stage_buffers(size_t bytes) {
  if (bytes <= g_cap) return;
  if (g_out) MGPU_CUDA(cudaFreeHost(g_out));
  if (g_in) MGPU_CUDA(cudaFreeHost(g_in));
  MGPU_CUDA(cudaMallocHost(&g_out, bytes));
  MGPU_CUDA(cudaMallocHost(&g_in, bytes));
  g_cap = bytes;
}

pp_stats pingpong(const void *send, void *recv, size_t bytes, int reps, cudaStream_t stream,
                  MPI_Comm comm) {
  pp_stats st = {0, 0};
  int rank, world;
  MGPU_MPI(MPI_Comm_rank(comm, &rank));
  MGPU_MPI(MPI_Comm_size(comm, &world));
  const int partner = rank ^ 1;
  if (partner >= world) return st;
  stage_buffers(bytes);
  MGPU_CUDA(cudaStreamSynchronize(stream));

  const int count = (int)bytes;
  const double t0 = MPI_Wtime();
  for (int i = 0; i < reps; i++) {
    if (rank % 2 == 0) {
      MGPU_CUDA(cudaMemcpyAsync(g_out, send, bytes, cudaMemcpyDeviceToHost, stream));
      MGPU_CUDA(cudaStreamSynchronize(stream));
      MGPU_MPI(MPI_Send(g_out, count, MPI_BYTE, partner, 0, comm));
      MGPU_MPI(MPI_Recv(g_in, count, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE));
      MGPU_CUDA(cudaMemcpyAsync(recv, g_in, bytes, cudaMemcpyHostToDevice, stream));
      MGPU_CUDA(cudaStreamSynchronize(stream));
    } else {
      MGPU_MPI(MPI_Recv(g_in, count, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE));
      MGPU_CUDA(cudaMemcpyAsync(recv, g_in, bytes, cudaMemcpyHostToDevice, stream));
      MGPU_CUDA(cudaMemcpyAsync(g_out, send, bytes, cudaMemcpyDeviceToHost, stream));
      MGPU_CUDA(cudaStreamSynchronize(stream));
      MGPU_MPI(MPI_Send(g_out, count, MPI_BYTE, partner, 0, comm));
    }
  }
  const double elapsed = MPI_Wtime() - t0;
  st.one_way_us = elapsed * 1e6 / reps / 2;
  st.gbps = (double)bytes / (st.one_way_us * 1e-6) / 1e9;
  return st;
}
