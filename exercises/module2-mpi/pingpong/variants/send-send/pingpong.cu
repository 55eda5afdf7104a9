// module2/pingpong — variant send-send: both ranks of a pair send first, then receive.
// Small messages fit MPI's eager buffers and get through; from some size on a blocking
// MPI_Send waits for the matching receive, which the partner never posts because it is
// blocked in its own MPI_Send: a deadlock, until the checker's time-out.
#include "pingpong.h"

pp_stats pingpong(const void *send, void *recv, size_t bytes, int reps, cudaStream_t stream,
                  MPI_Comm comm) {
  pp_stats st = {0, 0};
  int rank, world;
  MGPU_MPI(MPI_Comm_rank(comm, &rank));
  MGPU_MPI(MPI_Comm_size(comm, &world));
  const int partner = rank ^ 1; // pairs (0, 1), (2, 3), ...
  if (partner >= world) return st; // the last of an odd count has nobody to talk to

  // MPI knows nothing about streams: the kernel that fills `send` must be done before MPI
  // reads the buffer.
  MGPU_CUDA(cudaStreamSynchronize(stream));

  const int count = (int)bytes; // the driver's sizes fit an int
  const double t0 = MPI_Wtime();
  for (int i = 0; i < reps; i++) {
    MGPU_MPI(MPI_Send(send, count, MPI_BYTE, partner, 0, comm));
    MGPU_MPI(MPI_Recv(recv, count, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE));
  }
  const double elapsed = MPI_Wtime() - t0;
  st.one_way_us = elapsed * 1e6 / reps / 2;
  st.gbps = (double)bytes / (st.one_way_us * 1e-6) / 1e9;
  return st;
}
