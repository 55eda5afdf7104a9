/*
 * Variant default-stream: the reference, but the kernel is launched without a stream argument,
 * on the legacy default stream, while the barrier is queued on `stream`. The driver's stream is
 * non-blocking, so nothing orders the kernel after the work queued on `stream` before the call
 * (which writes `mine`): the kernel sends whatever `mine` holds at launch. While the driver
 * wrote `mine` and synchronized before calling, this passed; now the fill of `mine` is queued
 * on `stream` behind the late PE's sleep, so the late PE sends the driver's "not yet written"
 * marker and its successor reports it. Expected to fail at correctness.
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
  if (n > 0) {
    const int threads = 256;
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 1024) blocks = 1024;
    hello_kernel<<<(unsigned)blocks, threads>>>(inbox, mine, n); /* no stream: the default one */
    MGPU_KERNEL();
  }
  nvshmemx_barrier_all_on_stream(stream);
}
