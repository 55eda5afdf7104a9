/*
 * Variant gib-units: the reference measurement, reported in GiB/s (2^30 bytes per second)
 * instead of GB/s (1e9), which task.md asks for explicitly. The figure is 1e9 / 2^30 = 0.931
 * of the right one: 6.9 % low, outside the ±5 % band, and the driver names the factor. Must
 * fail at correctness.
 */
#include "timing.h"

#include <algorithm>

double time_copy_gbps(copy_op op, void *arg, size_t bytes, cudaStream_t stream) {
  const int warmup = 2, iters = 10, samples = 5;
  cudaEvent_t start, stop;
  MGPU_CUDA(cudaEventCreate(&start));
  MGPU_CUDA(cudaEventCreate(&stop));

  // Warm-up: the first copies pay for one-time costs (lazy loading, clocks ramping up).
  for (int i = 0; i < warmup; i++) op(arg, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));

  // Each sample: events on the same stream around `iters` copies back to back, so the GPU
  // timestamps the start and the end of the work itself, not its launch.
  double gbps[samples];
  for (int k = 0; k < samples; k++) {
    MGPU_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; i++) op(arg, stream);
    MGPU_CUDA(cudaEventRecord(stop, stream));
    MGPU_CUDA(cudaEventSynchronize(stop));  // the stop event must have happened before we read it
    float ms = 0;
    MGPU_CUDA(cudaEventElapsedTime(&ms, start, stop));
    double seconds = ms / 1e3;
    gbps[k] = (double)bytes * iters / seconds / (1024.0 * 1024.0 * 1024.0);  // GiB/s, not GB/s
  }
  MGPU_CUDA(cudaEventDestroy(start));
  MGPU_CUDA(cudaEventDestroy(stop));

  // The median resists the odd slow sample.
  std::sort(gbps, gbps + samples);
  return gbps[samples / 2];
}
