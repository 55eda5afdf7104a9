// module2/pingpong — variant no-stream-sync: the reference without the stream
// synchronization. MPI reads `send` while the driver's fill kernel is still queued on the
// stream, and ships what the buffer held before.
#include "pingpong.h"

pp_stats pingpong(const void *send, void *recv, size_t bytes, int reps, cudaStream_t stream,
                  MPI_Comm comm) {
  pp_stats st = {0, 0};
  int rank, world;
  MGPU_MPI(MPI_Comm_rank(comm, &rank));
  MGPU_MPI(MPI_Comm_size(comm, &world));
  const int partner = rank ^ 1; // pairs (0, 1), (2, 3), ...
  if (partner >= world) return st; // the last of an odd count has nobody to talk to

  (void)stream; // "MPI_Send is blocking, so it will wait": it waits for MPI, not for the GPU

  const int count = (int)bytes; // the driver's sizes fit an int
  const double t0 = MPI_Wtime();
  for (int i = 0; i < reps; i++) {
    if (rank % 2 == 0) { // ping first, then wait for the pong
      MGPU_MPI(MPI_Send(send, count, MPI_BYTE, partner, 0, comm));
      MGPU_MPI(MPI_Recv(recv, count, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE));
    } else { // the opposite order: a blocking send waits for its receive
      MGPU_MPI(MPI_Recv(recv, count, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE));
      MGPU_MPI(MPI_Send(send, count, MPI_BYTE, partner, 0, comm));
    }
  }
  const double elapsed = MPI_Wtime() - t0;
  st.one_way_us = elapsed * 1e6 / reps / 2;
  st.gbps = (double)bytes / (st.one_way_us * 1e-6) / 1e9;
  return st;
}
