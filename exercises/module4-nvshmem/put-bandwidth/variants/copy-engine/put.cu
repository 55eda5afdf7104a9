/*
 * Variant copy-engine: asks NVSHMEM for the peer's address of dst and copies with
 * cudaMemcpyAsync — the baseline itself, not a put from a kernel. Expected to fail at the
 * policy stage.
 */
#include "put-bandwidth.h"

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  void *remote = nvshmem_ptr(dst, peer);
  MGPU_CUDA(cudaMemcpyAsync(remote, src, bytes, cudaMemcpyDeviceToDevice, stream));
}
