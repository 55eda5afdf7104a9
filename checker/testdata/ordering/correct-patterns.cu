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
