/*
 * Variant copy-engine: gets the next PE's inbox address with nvshmem_ptr and copies with
 * cudaMemcpyAsync — correct data, but a copy-engine transfer started by the host, not a put
 * from a kernel, which is the exercise. Expected to fail at the policy stage.
 */
#include "ring-hello.h"

void *hello_alloc(size_t bytes) { return nvshmem_malloc(bytes); }

void hello_free(void *p) { nvshmem_free(p); }

void ring_hello(float *inbox, const float *mine, size_t n, cudaStream_t stream) {
  const int next = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
  float *peer = (float *)nvshmem_ptr(inbox, next);
  MGPU_CUDA(cudaMemcpyAsync(peer, mine, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  nvshmemx_barrier_all_on_stream(stream);
}
