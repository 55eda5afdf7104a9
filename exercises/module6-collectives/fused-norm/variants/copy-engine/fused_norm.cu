// module6/fused-norm, variant copy-engine: the peers' inputs are moved by the copy engine, not by
// the kernel's loads: cudaMemcpyAsync (device to device, over the view's peer pointers) into this
// member's scratch, between a kernel that announces and waits for "ready" and a kernel that adds
// the local copies and the residual, normalizes each row and does the "done" handshake. Right on
// every team, so only the policy stage can refuse it (cudaMemcpy* is forbidden).
#include <cuda/atomic>

#include "fused_norm.h"

namespace {

constexpr int kThreads = 256;
constexpr int READY = 0;
constexpr int DONE = AR_MAX_RANKS;

using sys_flag = cuda::atomic_ref<unsigned int, cuda::thread_scope_system>;

__global__ void k_ready(ar_view v, unsigned int epoch) {
  const int t = threadIdx.x;
  if (t < v.world && t != v.rank) sys_flag(v.flags[t][READY + v.rank]).store(epoch, cuda::memory_order_release);
  if (t < v.world && t != v.rank) {
    sys_flag ready(v.flags[v.rank][READY + t]);
    while (ready.load(cuda::memory_order_acquire) < epoch) __nanosleep(32);
  }
}

// One block per row: s = the sum of the copies + the residual, then s * rsqrt(mean(s^2) + eps) * gamma.
__global__ void k_norm_done(ar_view v, const float *copies, long long n, const float *residual, const float *gamma,
                            float eps, float *residual_out, float *out, int rows, int hidden, unsigned int epoch) {
  __shared__ float red[kThreads];
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long base = (long long)row * hidden;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      float s = residual[base + i];
      for (int p = 0; p < v.world; p++) s += copies[(long long)p * n + base + i];
      residual_out[base + i] = s;
      ss += s * s;
    }
    red[threadIdx.x] = ss;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
      if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
      __syncthreads();
    }
    const float scale = rsqrtf(red[0] / (float)hidden + eps);
    __syncthreads();
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[base + i] = residual_out[base + i] * scale * gamma[i];
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (blockIdx.x == 0 && t < v.world && t != v.rank)
    sys_flag(v.flags[t][DONE + v.rank]).fetch_add(1u, cuda::memory_order_release);
  if (blockIdx.x == 0 && t < v.world && t != v.rank) {
    sys_flag finished(v.flags[v.rank][DONE + t]);
    while (finished.load(cuda::memory_order_acquire) < epoch) __nanosleep(32);
  }
}

}  // namespace

void fused_allreduce_rmsnorm(const ar_view *v, const float *residual, const float *gamma, float eps,
                             float *residual_out, float *out, int rows, int hidden, unsigned int epoch,
                             cudaStream_t stream) {
  const long long n = (long long)rows * hidden;
  k_ready<<<1, 32, 0, stream>>>(*v, epoch);
  MGPU_KERNEL();
  float *copies = v->scratch[v->rank];
  for (int p = 0; p < v->world; p++)
    MGPU_CUDA(cudaMemcpyAsync(copies + (long long)p * n, v->in[p], sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice,
                              stream));
  const int blocks = rows < 1024 ? rows : 1024;
  k_norm_done<<<blocks, kThreads, 0, stream>>>(*v, copies, n, residual, gamma, eps, residual_out, out, rows, hidden,
                                               epoch);
  MGPU_KERNEL();
}
