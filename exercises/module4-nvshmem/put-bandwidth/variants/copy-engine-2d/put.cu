/*
 * Variant copy-engine-2d: one row of `bytes` bytes copied with cudaMemcpy2DAsync to the address
 * nvshmem_ptr gives for the peer's dst. It is cudaMemcpyAsync under another name: the copy
 * engine, the baseline, at the baseline's speed. Expected to fail at the policy stage.
 */
#include "put-bandwidth.h"

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  if (bytes == 0) return;
  void *remote = nvshmem_ptr(dst, peer);
  MGPU_CUDA(cudaMemcpy2DAsync(remote, bytes, src, bytes, bytes, 1, cudaMemcpyDeviceToDevice,
                              stream));
}
