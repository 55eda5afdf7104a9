// module0/bandwidth-matrix: reference solution.
#include "bandwidth_matrix.h"

#include <algorithm>
#include <vector>

namespace {

const int kCopies = 3;   // copies per timed sample
const int kSamples = 3;  // timed samples per entry (after one untimed warm-up sample)

struct Gpu {
  void *src = nullptr, *dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr, done = nullptr;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double elapsed_s(cudaEvent_t a, cudaEvent_t b) {
  MGPU_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  MGPU_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms / 1e3;
}

// GB/s of copies i -> j alone, timed on i's stream.
double one_way(std::vector<Gpu> &g, int i, int j, size_t bytes) {
  MGPU_CUDA(cudaSetDevice(i));
  MGPU_CUDA(cudaEventRecord(g[i].start, g[i].stream));
  for (int k = 0; k < kCopies; k++)
    MGPU_CUDA(cudaMemcpyPeerAsync(g[j].dst, j, g[i].src, i, bytes, g[i].stream));
  MGPU_CUDA(cudaEventRecord(g[i].stop, g[i].stream));
  return (double)bytes * kCopies / elapsed_s(g[i].start, g[i].stop) / 1e9;
}

// GB/s (both directions' bytes) of i -> j on i's stream and j -> i on j's stream at once.
// j's stream waits for i's start event, and i's stop event waits for j's last copy, so the
// two events enclose everything.
double both_ways(std::vector<Gpu> &g, int i, int j, size_t bytes) {
  MGPU_CUDA(cudaSetDevice(i));
  MGPU_CUDA(cudaEventRecord(g[i].start, g[i].stream));
  MGPU_CUDA(cudaSetDevice(j));
  MGPU_CUDA(cudaStreamWaitEvent(g[j].stream, g[i].start, 0));
  for (int k = 0; k < kCopies; k++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_CUDA(cudaMemcpyPeerAsync(g[j].dst, j, g[i].src, i, bytes, g[i].stream));
    MGPU_CUDA(cudaSetDevice(j));
    MGPU_CUDA(cudaMemcpyPeerAsync(g[i].dst, i, g[j].src, j, bytes, g[j].stream));
  }
  MGPU_CUDA(cudaEventRecord(g[j].done, g[j].stream));
  MGPU_CUDA(cudaSetDevice(i));
  MGPU_CUDA(cudaStreamWaitEvent(g[i].stream, g[j].done, 0));
  MGPU_CUDA(cudaEventRecord(g[i].stop, g[i].stream));
  return 2.0 * (double)bytes * kCopies / elapsed_s(g[i].start, g[i].stop) / 1e9;
}

template <class F>
double measure(F sample) {
  sample();  // warm-up, not counted
  std::vector<double> v;
  for (int k = 0; k < kSamples; k++) v.push_back(sample());
  return median(v);
}

}  // namespace

void bandwidth_matrix(int n, size_t bytes, double *uni, double *bidir, int *slowest_src,
                      int *slowest_dst) {
  std::vector<Gpu> g(n);

  // Direct copies need peer access, enabled from every device to every other one.
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j) continue;
      int ok = 0;
      MGPU_CUDA(cudaDeviceCanAccessPeer(&ok, i, j));
      if (!ok) continue;
      MGPU_CUDA(cudaSetDevice(i));
      cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        MGPU_CUDA(e);
    }

  for (int i = 0; i < n; i++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_CUDA(cudaMalloc(&g[i].src, bytes));
    MGPU_CUDA(cudaMalloc(&g[i].dst, bytes));
    MGPU_CUDA(cudaMemset(g[i].src, i + 1, bytes));
    MGPU_CUDA(cudaStreamCreate(&g[i].stream));
    MGPU_CUDA(cudaEventCreate(&g[i].start));
    MGPU_CUDA(cudaEventCreate(&g[i].stop));
    MGPU_CUDA(cudaEventCreateWithFlags(&g[i].done, cudaEventDisableTiming));
  }
  for (int i = 0; i < n; i++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_CUDA(cudaDeviceSynchronize());
  }

  *slowest_src = *slowest_dst = -1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      uni[i * n + j] = bidir[i * n + j] = 0;
      if (i == j) continue;
      uni[i * n + j] = measure([&] { return one_way(g, i, j, bytes); });
      if (*slowest_src < 0 || uni[i * n + j] < uni[*slowest_src * n + *slowest_dst]) {
        *slowest_src = i;
        *slowest_dst = j;
      }
    }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      bidir[i * n + j] = bidir[j * n + i] = measure([&] { return both_ways(g, i, j, bytes); });

  for (int i = 0; i < n; i++) {
    MGPU_CUDA(cudaSetDevice(i));
    MGPU_CUDA(cudaFree(g[i].src));
    MGPU_CUDA(cudaFree(g[i].dst));
    MGPU_CUDA(cudaStreamDestroy(g[i].stream));
    MGPU_CUDA(cudaEventDestroy(g[i].start));
    MGPU_CUDA(cudaEventDestroy(g[i].stop));
    MGPU_CUDA(cudaEventDestroy(g[i].done));
  }
}
