/*
 * Variant host-put-nbi: NVSHMEM's host-initiated put on the stream, under a name the manifest
 * did not list at first (nvshmemx_float_put_nbi_on_stream instead of the forbidden
 * nvshmemx_float_put_on_stream). NVSHMEM carries it out with a copy engine: right data, but
 * no put from a kernel. Expected to fail at the policy stage (every nvshmemx_*put*_on_stream
 * is refused).
 */
#include "ring-hello.h"

void *hello_alloc(size_t bytes) { return nvshmem_malloc(bytes); }

void hello_free(void *p) { nvshmem_free(p); }

void ring_hello(float *inbox, const float *mine, size_t n, cudaStream_t stream) {
  const int next = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
  if (n > 0) nvshmemx_float_put_nbi_on_stream(inbox, mine, n, next, stream);
  nvshmemx_barrier_all_on_stream(stream);
}
