// module0/timing variant: warms up and times 20 copies, but with a host clock that stops before
// the copies have run (the synchronize comes after the clock is read): it measures 20 launches.
#include "timing.h"

#include <chrono>

double time_copy_gbps(copy_op op, void *arg, size_t bytes, cudaStream_t stream) {
  const int iters = 20;
  op(arg, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; i++) op(arg, stream);
  auto t1 = std::chrono::steady_clock::now();
  MGPU_CUDA(cudaStreamSynchronize(stream));  // too late: the clock has already stopped
  double seconds = std::chrono::duration<double>(t1 - t0).count();
  return (double)bytes * iters / seconds / 1e9;
}
