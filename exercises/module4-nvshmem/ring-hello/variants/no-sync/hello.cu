/*
 * Variant no-sync: puts into the next PE's inbox and returns. Nothing makes this PE wait for
 * the data coming TO it, so the driver's read of the inbox right behind the kernel races the
 * previous PE's put. The driver starts one PE 30 ms late each iteration: its successor then
 * reads pure poison. Expected to fail at correctness.
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
  /* Missing: a barrier (or a signal wait) on `stream`. The quiet in the kernel completes this
   * PE's outgoing puts; it says nothing about the puts other PEs make into this PE. */
}
