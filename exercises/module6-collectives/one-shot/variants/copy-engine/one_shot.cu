// module6/one-shot, variant copy-engine: the peers' inputs are moved by the copy engine, not by
// the kernel's loads: cudaMemcpyAsync (device to device, the view's peer pointers) into this
// member's scratch, between a kernel that announces and waits for "ready" and a kernel that sums
// the local copies and does the "done" handshake. The result is right on every team, so only
// the policy stage can refuse it: the forbidden list names cudaMemcpyPeer*, and a plain
// cudaMemcpyAsync over peer pointers is the same copy under another name.
#include <cuda/atomic>

#include "one_shot.h"

namespace {

constexpr int kThreads = 512;
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

__global__ void k_sum_done(ar_view v, const float *copies, float *out, long long n, unsigned int epoch) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float s = copies[i];
    for (int p = 1; p < v.world; p++) s += copies[(long long)p * n + i];
    out[i] = s;
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

void one_shot_all_reduce(const ar_view *v, float *out, long long n, unsigned int epoch, cudaStream_t stream) {
  k_ready<<<1, 32, 0, stream>>>(*v, epoch);
  MGPU_KERNEL();
  float *copies = v->scratch[v->rank];
  for (int p = 0; p < v->world; p++)
    MGPU_CUDA(cudaMemcpyAsync(copies + (long long)p * n, v->in[p], sizeof(float) * (size_t)n, cudaMemcpyDeviceToDevice,
                              stream));
  long long blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 128) blocks = 128;
  k_sum_done<<<(unsigned)blocks, kThreads, 0, stream>>>(*v, copies, out, n, epoch);
  MGPU_KERNEL();
}
