// module0/alpha-beta: reference solution.
#include "alpha_beta.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

// µs per copy of `iters` copies of `bytes` back to back, between two events on `stream`.
double per_copy_us(sized_copy_op op, void *arg, size_t bytes, int iters, cudaStream_t stream,
                   cudaEvent_t start, cudaEvent_t stop) {
  MGPU_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; i++) op(arg, bytes, stream);
  MGPU_CUDA(cudaEventRecord(stop, stream));
  MGPU_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms * 1000.0 / iters;
}

}  // namespace

void fit_alpha_beta(sized_copy_op op, void *arg, size_t max_bytes, cudaStream_t stream,
                    double *alpha_us, double *beta_gbps) {
  cudaEvent_t start, stop;
  MGPU_CUDA(cudaEventCreate(&start));
  MGPU_CUDA(cudaEventCreate(&stop));

  // Sweep: t(n) for n = 8, 16, ..., max_bytes.
  std::vector<double> n, t;
  for (size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
    per_copy_us(op, arg, bytes, 2, stream, start, stop);  // warm-up
    // Enough copies per sample that it lasts about a millisecond.
    double estimate = per_copy_us(op, arg, bytes, 5, stream, start, stop);
    int iters = std::clamp((int)std::ceil(1000.0 / std::max(estimate, 0.1)), 5, 2000);
    std::vector<double> samples;
    for (int k = 0; k < 5; k++)
      samples.push_back(per_copy_us(op, arg, bytes, iters, stream, start, stop));
    std::sort(samples.begin(), samples.end());
    n.push_back((double)bytes);
    t.push_back(samples[samples.size() / 2]);  // the median
  }
  MGPU_CUDA(cudaEventDestroy(start));
  MGPU_CUDA(cudaEventDestroy(stop));

  // Least squares for t = alpha + slope * n, with n and t centred on their means.
  const double m = (double)n.size();
  double mean_n = 0, mean_t = 0;
  for (size_t i = 0; i < n.size(); i++) {
    mean_n += n[i] / m;
    mean_t += t[i] / m;
  }
  double snn = 0, snt = 0;
  for (size_t i = 0; i < n.size(); i++) {
    snn += (n[i] - mean_n) * (n[i] - mean_n);
    snt += (n[i] - mean_n) * (t[i] - mean_t);
  }
  double slope = snt / snn;  // µs per byte
  *alpha_us = mean_t - slope * mean_n;
  *beta_gbps = 1.0 / slope / 1e3;  // 1 byte/µs = 1e6 bytes/s = 1e-3 GB/s
}
