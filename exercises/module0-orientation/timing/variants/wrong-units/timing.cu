// module0/timing variant: times correctly with events, but divides by the milliseconds that
// cudaEventElapsedTime returns as if they were seconds: the figure is 1000 times too low.
#include "timing.h"

double time_copy_gbps(copy_op op, void *arg, size_t bytes, cudaStream_t stream) {
  const int iters = 10;
  cudaEvent_t start, stop;
  MGPU_CUDA(cudaEventCreate(&start));
  MGPU_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 2; i++) op(arg, stream);
  MGPU_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; i++) op(arg, stream);
  MGPU_CUDA(cudaEventRecord(stop, stream));
  MGPU_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, start, stop));
  MGPU_CUDA(cudaEventDestroy(start));
  MGPU_CUDA(cudaEventDestroy(stop));
  return (double)bytes * iters / ms / 1e9;  // ms used as seconds
}
