// module2/pingpong — variant mirror-partner: pairs rank r with world-1-r (the middle rank of
// an odd count sits out), the rank nearer 0 sending first. On 2 ranks that is (0, 1), right;
// on 3 it pairs 0 with 2 and leaves 1 idle, on 4 it pairs (0, 3) and (1, 2). Nothing hangs;
// the bytes come from the wrong rank. The expectation holds on 3 or more ranks.
#include "pingpong.h"

pp_stats pingpong(const void *send, void *recv, size_t bytes, int reps, cudaStream_t stream,
                  MPI_Comm comm) {
  pp_stats st = {0, 0};
  int rank, world;
  MGPU_MPI(MPI_Comm_rank(comm, &rank));
  MGPU_MPI(MPI_Comm_size(comm, &world));
  const int partner = world - 1 - rank;
  if (partner == rank) return st;

  // MPI knows nothing about streams: the kernel that fills `send` must be done before MPI
  // reads the buffer.
  MGPU_CUDA(cudaStreamSynchronize(stream));

  const int count = (int)bytes; // the driver's sizes fit an int
  const double t0 = MPI_Wtime();
  for (int i = 0; i < reps; i++) {
    if (rank < partner) { // ping first, then wait for the pong
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
