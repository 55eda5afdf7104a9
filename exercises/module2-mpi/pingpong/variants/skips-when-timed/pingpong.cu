// module2/pingpong — variant skips-when-timed: the reference, except that it counts its calls
// and returns {0, 0} without moving a byte once it has been called more than 20 times. Every
// rank makes the same calls in the same order, so all of them start skipping at the same call
// and nobody waits for a partner that skipped.
//
// The count, per rank, on any number of ranks: the correctness cases make 5 cases x 3 rounds =
// 15 calls, all real. The first perf case (8B) then makes 2 warm-up calls, 1 calibration call
// and at least 5 timed samples (the manifest's min_reps) of one call each: calls 16 to 23 or
// more. So the warm-ups, the calibration and the first two samples are real, and everything
// from call 21 on does nothing: the remaining timed calls and the driver's check after the
// timing (one more round, fresh data in the timed buffers, recv poisoned first), which finds
// recv still poisoned. Must fail at correctness, in the "timed-<perf case>" records.
#include "pingpong.h"

static const int kWorkingCalls = 20; // calls that do the work; every later one returns at once

pp_stats pingpong(const void *send, void *recv, size_t bytes, int reps, cudaStream_t stream,
                  MPI_Comm comm) {
  static int calls = 0;
  pp_stats st = {0, 0};
  if (++calls > kWorkingCalls) return st; // "the data has moved before, with these buffers"
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
