#include <cstdio>
#include <cuda/atomic>
using F = cuda::atomic_ref<unsigned int, cuda::thread_scope_system>;
__global__ void seqcst(unsigned *flag, unsigned *peer, float *data, float *out, unsigned e) {
  data[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) { F(*peer).store(e); F(*peer).fetch_add(1u); while (F(*flag).load() < e) {} }
  __syncthreads();
  out[threadIdx.x] = data[threadIdx.x];
}
__global__ void fences(unsigned *flag, unsigned *peer, float *data, float *out, unsigned e) {
  data[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) { __threadfence_system(); atomicAdd_system(peer, 1u); while (*(volatile unsigned *)flag < e) {} __threadfence_system(); }
  __syncthreads();
  out[threadIdx.x] = data[threadIdx.x];
}
__global__ void casloop(unsigned *flag, unsigned *peer, unsigned e) {
  if (threadIdx.x == 0) { __threadfence_system(); atomicExch_system(peer, e); while (atomicCAS_system(flag, e, e) != e) {} __threadfence_system(); }
}
// Every thread fences its own writes, then the block meets and one thread signals.
__global__ void fence_then_meet(unsigned *peer_flag, float *peer, const float *in) {
  peer[threadIdx.x] = in[threadIdx.x];
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) F(*peer_flag).fetch_add(1u, cuda::memory_order_relaxed);
}
// One thread waits, fences, and the block meets before reading.
__global__ void wait_fence_meet(const unsigned *flag, const float *peer, float *out, unsigned e) {
  if (threadIdx.x == 0) {
    while (F(*const_cast<unsigned *>(flag)).load(cuda::memory_order_relaxed) < e) {}
    __threadfence_system();
  }
  __syncthreads();
  out[threadIdx.x] = peer[threadIdx.x];
}
// printf after a relaxed wait reads only the thread's own arguments. (A kernel's end orders what
// later kernels read.)
__global__ void wait_then_printf(unsigned *flag, unsigned e) {
  while (F(*flag).load(cuda::memory_order_relaxed) < e) {}
  printf("epoch %u\n", e);
}
// One thread signals every peer in a loop with release: a loop, but no spin.
__global__ void release_in_peer_loop(unsigned **peer_flags, float *peer, const float *in, int world) {
  peer[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0)
    for (int p = 0; p < world; p++) F(*peer_flags[p]).fetch_add(1u, cuda::memory_order_release);
}
