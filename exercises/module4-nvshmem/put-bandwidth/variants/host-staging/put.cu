/*
 * Variant host-staging: copies src to host memory and from there to the peer's dst — two
 * trips over PCIe instead of one over NVLink, and the host blocks on both. Expected to fail
 * at the policy stage (cudaMemcpy is not a put from a kernel).
 */
#include <stdlib.h>

#include "put-bandwidth.h"

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  void *host = malloc(bytes);
  if (!host) return;
  MGPU_CUDA(cudaStreamSynchronize(stream));
  MGPU_CUDA(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost));
  MGPU_CUDA(cudaMemcpy(nvshmem_ptr(dst, peer), host, bytes, cudaMemcpyHostToDevice));
  free(host);
}
