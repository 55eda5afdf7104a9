// Flag code that is wrong although a system fence appears in it (checker/ordering_test.go).
#include <cuda/atomic>
using F = cuda::atomic_ref<unsigned int, cuda::thread_scope_system>;
// The fence comes before the data it should order.
__global__ void fence_before_data(unsigned *peer_flag, float *peer, const float *in) {
  __threadfence_system();
  peer[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd_system(peer_flag, 1u);
}
// The fence is on one branch only.
__global__ void fence_one_branch(unsigned *peer_flag, float *peer, const float *in, int quick) {
  peer[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    if (!quick) __threadfence_system();
    F(*peer_flag).fetch_add(1u, cuda::memory_order_relaxed);
  }
}
// The reads that follow the wait come before the fence.
__global__ void fence_after_reads(const unsigned *flag, const float *peer, float *out, unsigned e) {
  if (threadIdx.x == 0) {
    while (F(*const_cast<unsigned *>(flag)).load(cuda::memory_order_relaxed) < e) {}
  }
  __syncthreads();
  out[threadIdx.x] = peer[threadIdx.x];
  __threadfence_system();
}
// A function of its own (not inlined) writes the result right after a relaxed wait.
__device__ __noinline__ void store_result(float *out, const float *peer) { out[threadIdx.x] = peer[threadIdx.x]; }
__global__ void call_after_wait(const unsigned *flag, const float *peer, float *out, unsigned e) {
  while (F(*const_cast<unsigned *>(flag)).load(cuda::memory_order_relaxed) < e) {}
  store_result(out, peer);
}
// A spin on a volatile load, and nothing after it orders the reads.
__global__ void volatile_spin(const unsigned *flag, const float *peer, float *out, unsigned e) {
  while (*(volatile const unsigned *)flag < e) {}
  out[threadIdx.x] = peer[threadIdx.x];
}
// Relaxed signals to every peer in a loop after the data, with no fence.
__global__ void relaxed_peer_loop(unsigned **peer_flags, float *peer, const float *in, int world) {
  peer[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0)
    for (int p = 0; p < world; p++) atomicAdd_system(peer_flags[p], 1u);
}
