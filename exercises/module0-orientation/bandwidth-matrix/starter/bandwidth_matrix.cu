// module0/bandwidth-matrix: your code. The driver calls this function; see task.md.
#include "bandwidth_matrix.h"

void bandwidth_matrix(int n, size_t bytes, double *uni, double *bidir, int *slowest_src,
                      int *slowest_dst) {
  (void)bytes;
  // TODO 1: enable peer access from every device to every other one (where
  //         cudaDeviceCanAccessPeer says it is possible).
  // TODO 2: on each device, allocate a source and a destination buffer of `bytes` bytes, a
  //         stream, and CUDA events.
  // TODO 3: uni[i*n+j]: time copies from device i to device j (cudaMemcpyPeerAsync on i's
  //         stream, between two events, after a warm-up), in GB/s.
  // TODO 4: bidir[i*n+j]: time i -> j and j -> i at the same time, on two streams, one on each
  //         device; report the sum of both directions in GB/s.
  // TODO 5: name the slowest ordered pair, and free everything you allocated.
  for (int k = 0; k < n * n; k++) uni[k] = bidir[k] = 0;
  *slowest_src = 0;
  *slowest_dst = 0;
}
