// module0/alpha-beta variant: sweeps and fits correctly, but times each size with a host clock
// that stops before the copies have run (the synchronize comes after the clock is read). Every
// size then "takes" the time of its launches, and the fitted beta is absurd.
#include "alpha_beta.h"

#include <algorithm>
#include <chrono>
#include <vector>

void fit_alpha_beta(sized_copy_op op, void *arg, size_t max_bytes, cudaStream_t stream,
                    double *alpha_us, double *beta_gbps) {
  const int iters = 20;
  std::vector<double> n, t;
  for (size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
    op(arg, bytes, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));
    std::vector<double> samples;
    for (int k = 0; k < 5; k++) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; i++) op(arg, bytes, stream);
      auto t1 = std::chrono::steady_clock::now();
      MGPU_CUDA(cudaStreamSynchronize(stream));  // too late: the clock has already stopped
      samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
    }
    std::sort(samples.begin(), samples.end());
    n.push_back((double)bytes);
    t.push_back(samples[2]);
  }
  const double m = (double)n.size();
  double mean_n = 0, mean_t = 0, snn = 0, snt = 0;
  for (size_t i = 0; i < n.size(); i++) {
    mean_n += n[i] / m;
    mean_t += t[i] / m;
  }
  for (size_t i = 0; i < n.size(); i++) {
    snn += (n[i] - mean_n) * (n[i] - mean_n);
    snt += (n[i] - mean_n) * (t[i] - mean_t);
  }
  double slope = snt / snn;
  *alpha_us = mean_t - slope * mean_n;
  *beta_gbps = 1.0 / slope / 1e3;
}
