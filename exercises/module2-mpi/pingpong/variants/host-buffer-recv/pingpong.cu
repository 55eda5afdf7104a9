// module2/pingpong — variant host-buffer-recv: receives into a host buffer, as code written
// for an MPI without CUDA support would, and never copies it into the device buffer `recv`:
// recv keeps the driver's poison. (A host pointer where the device pointer belongs.)
#include <stdlib.h>

#include "pingpong.h"

pp_stats pingpong(const void *send, void *recv, size_t bytes, int reps, cudaStream_t stream,
                  MPI_Comm comm) {
  pp_stats st = {0, 0};
  int rank, world;
  MGPU_MPI(MPI_Comm_rank(comm, &rank));
  MGPU_MPI(MPI_Comm_size(comm, &world));
  const int partner = rank ^ 1;
  if (partner >= world) return st;
  MGPU_CUDA(cudaStreamSynchronize(stream));
  void *host = malloc(bytes);
  if (!host) return st;
  (void)recv;

  const int count = (int)bytes;
  const double t0 = MPI_Wtime();
  for (int i = 0; i < reps; i++) {
    if (rank % 2 == 0) {
      MGPU_MPI(MPI_Send(send, count, MPI_BYTE, partner, 0, comm));
      MGPU_MPI(MPI_Recv(host, count, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE));
    } else {
      MGPU_MPI(MPI_Recv(host, count, MPI_BYTE, partner, 0, comm, MPI_STATUS_IGNORE));
      MGPU_MPI(MPI_Send(send, count, MPI_BYTE, partner, 0, comm));
    }
  }
  const double elapsed = MPI_Wtime() - t0;
  free(host);
  st.one_way_us = elapsed * 1e6 / reps / 2;
  st.gbps = (double)bytes / (st.one_way_us * 1e-6) / 1e9;
  return st;
}
