// module5/flag-barrier, variant fence-before-data: a __threadfence_system() before the stores
// and a relaxed count after them. The fence orders nothing the reader needs (the tile is written
// after it), so the count may reach the next GPU before the tile. The policy stage finds the
// count in the PTX (ordering: system): on every path to it, a data store comes after the fence.
#include <cuda/atomic>

#include "flags.h"

__device__ void exchange_tile(const symm_view *v, const float *mine, long long n, unsigned int epoch) {
  const int next = (v->rank + 1) % v->world, prev = (v->rank + v->world - 1) % v->world;

  // 1. Every block writes its share of the tile into the next rank's inbox (NVLink stores).
  float *dst = v->inbox[next];
  __threadfence_system();
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = mine[i];

  // 2. The block's stores come before thread 0's signal (the barrier orders them within the
  //    block), and the release at system scope makes them visible on the next GPU no later
  //    than the count itself.
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> sent(v->flags[next][v->rank]);
    sent.fetch_add(1u, cuda::memory_order_relaxed);

    // 3. Wait until all of the previous rank's blocks have signalled this epoch. The acquire
    //    makes their stores visible to this thread, and the barrier below to the whole block.
    cuda::atomic_ref<unsigned int, cuda::thread_scope_system> arrived(v->flags[v->rank][prev]);
    const unsigned int target = epoch * gridDim.x;
    while (arrived.load(cuda::memory_order_acquire) < target) __nanosleep(64);
  }
  __syncthreads();
}
