/*
 * Variant floor-chunks: a fixed number of blocks, each putting bytes / blocks bytes (rounded
 * down). The last bytes % blocks bytes belong to no block, and below `blocks` bytes every share
 * is empty. Right whenever the size divides evenly — never for the odd sizes the check uses.
 * Expected to fail at correctness.
 */
#include "put-bandwidth.h"

namespace {

__global__ void put_kernel(char *dst, const char *src, size_t share, int peer) {
  const size_t begin = (size_t)blockIdx.x * share;
  nvshmemx_putmem_nbi_block(dst + begin, src + begin, share, peer);
  nvshmem_quiet();
}

}  // namespace

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  int dev = 0, sms = 0;
  MGPU_CUDA(cudaGetDevice(&dev));
  MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int blocks = 2 * sms;
  put_kernel<<<blocks, 512, 0, stream>>>((char *)dst, (const char *)src, bytes / blocks, peer);
  MGPU_KERNEL();
}
