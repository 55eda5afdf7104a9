// module2/pingpong — variant uses-memcpy-peer: swaps CUDA IPC handles over MPI and moves the
// bytes with cudaMemcpyPeerAsync into the partner's buffer: the copy engine directly, which is
// the baseline, not MPI. The exercise forbids it.
#include "pingpong.h"

pp_stats pingpong(const void *send, void *recv, size_t bytes, int reps, cudaStream_t stream,
                  MPI_Comm comm) {
  pp_stats st = {0, 0};
  int rank, world, dev, peer_dev;
  MGPU_MPI(MPI_Comm_rank(comm, &rank));
  MGPU_MPI(MPI_Comm_size(comm, &world));
  const int partner = rank ^ 1;
  if (partner >= world) return st;
  MGPU_CUDA(cudaGetDevice(&dev));
  cudaIpcMemHandle_t mine, theirs;
  MGPU_CUDA(cudaIpcGetMemHandle(&mine, recv));
  MGPU_MPI(MPI_Sendrecv(&mine, sizeof mine, MPI_BYTE, partner, 1, &theirs, sizeof theirs, MPI_BYTE,
                        partner, 1, comm, MPI_STATUS_IGNORE));
  MGPU_MPI(MPI_Sendrecv(&dev, 1, MPI_INT, partner, 2, &peer_dev, 1, MPI_INT, partner, 2, comm,
                        MPI_STATUS_IGNORE));
  void *peer_recv = NULL;
  MGPU_CUDA(cudaIpcOpenMemHandle(&peer_recv, theirs, cudaIpcMemLazyEnablePeerAccess));
  const double t0 = MPI_Wtime();
  for (int i = 0; i < reps; i++) {
    MGPU_CUDA(cudaMemcpyPeerAsync(peer_recv, peer_dev, send, dev, bytes, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    MGPU_MPI(MPI_Barrier(comm));
  }
  const double elapsed = MPI_Wtime() - t0;
  MGPU_CUDA(cudaIpcCloseMemHandle(peer_recv));
  st.one_way_us = elapsed * 1e6 / reps / 2;
  st.gbps = (double)bytes / (st.one_way_us * 1e-6) / 1e9;
  return st;
}
