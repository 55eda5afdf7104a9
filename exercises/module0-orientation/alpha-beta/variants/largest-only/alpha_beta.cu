// module0/alpha-beta variant: times only the largest size and divides: beta comes out right,
// but alpha, the fixed cost that only small copies reveal, is taken to be 0.
#include "alpha_beta.h"

void fit_alpha_beta(sized_copy_op op, void *arg, size_t max_bytes, cudaStream_t stream,
                    double *alpha_us, double *beta_gbps) {
  const int iters = 5;
  cudaEvent_t start, stop;
  MGPU_CUDA(cudaEventCreate(&start));
  MGPU_CUDA(cudaEventCreate(&stop));
  op(arg, max_bytes, stream);  // warm-up
  MGPU_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; i++) op(arg, max_bytes, stream);
  MGPU_CUDA(cudaEventRecord(stop, stream));
  MGPU_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, start, stop));
  MGPU_CUDA(cudaEventDestroy(start));
  MGPU_CUDA(cudaEventDestroy(stop));
  double us = ms * 1000.0 / iters;
  *beta_gbps = (double)max_bytes / us / 1e3;
  *alpha_us = 0;  // "large copies show no fixed cost"
}
