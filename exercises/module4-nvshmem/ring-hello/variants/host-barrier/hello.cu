/*
 * Variant host-barrier: launches the kernel on `stream`, then calls the host's
 * nvshmem_barrier_all. That barrier runs on NVSHMEM's own stream and waits for the host
 * threads, not for kernels still queued on `stream`: on the PE the driver starts late, the
 * barrier returns while its put is 30 ms away, and its successor reads poison. Expected to fail
 * at correctness.
 */
#include "ring-hello.h"

namespace {

__global__ void hello_kernel(float *inbox, const float *mine, size_t n) {
  const int me = nvshmem_my_pe();
  const int next = (me + 1) % nvshmem_n_pes();
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    nvshmem_float_p(inbox + i, mine[i], next);
  nvshmem_quiet();
}

} // namespace

void *hello_alloc(size_t bytes) { return nvshmem_malloc(bytes); }

void hello_free(void *p) { nvshmem_free(p); }

void ring_hello(float *inbox, const float *mine, size_t n, cudaStream_t stream) {
  size_t blocks = (n + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  hello_kernel<<<(unsigned)blocks, 256, 0, stream>>>(inbox, mine, n);
  MGPU_KERNEL();
  nvshmem_barrier_all(); /* host-side: not ordered with the kernel above */
}
