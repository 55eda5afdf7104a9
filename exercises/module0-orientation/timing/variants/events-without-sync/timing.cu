// module0/timing variant: events in the right places, but the elapsed time is read while the
// copies are still running: the stop event has not happened yet, and cudaEventElapsedTime
// answers cudaErrorNotReady (which MGPU_CUDA reports, stopping the run).
#include "timing.h"

double time_copy_gbps(copy_op op, void *arg, size_t bytes, cudaStream_t stream) {
  const int iters = 20;
  cudaEvent_t start, stop;
  MGPU_CUDA(cudaEventCreate(&start));
  MGPU_CUDA(cudaEventCreate(&stop));
  op(arg, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  MGPU_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; i++) op(arg, stream);
  MGPU_CUDA(cudaEventRecord(stop, stream));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, start, stop));  // no cudaEventSynchronize(stop) first
  MGPU_CUDA(cudaEventDestroy(start));
  MGPU_CUDA(cudaEventDestroy(stop));
  return (double)bytes * iters / (ms / 1e3) / 1e9;
}
