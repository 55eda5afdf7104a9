/*
 * Variant blocking-put: the reference with the blocking nvshmemx_putmem_block instead of
 * _nbi, still ending with nvshmem_quiet. "Blocking" promises only that src may be reused when
 * the call returns, not that the bytes have arrived; over NVLink both calls are the block's
 * threads storing into peer memory, so the speed is the same. Expected to pass.
 */
#include "put-bandwidth.h"

namespace {

constexpr int kThreads = 512;
constexpr size_t kMinShare = size_t(64) << 10;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

__global__ void put_kernel(char *dst, const char *src, size_t bytes, size_t share, int peer) {
  const size_t begin = (size_t)blockIdx.x * share;
  if (begin < bytes) {
    const size_t len = bytes - begin < share ? bytes - begin : share;
    nvshmemx_putmem_block(dst + begin, src + begin, len, peer);
  }
  nvshmem_quiet();
}

}  // namespace

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  int dev = 0, sms = 0;
  MGPU_CUDA(cudaGetDevice(&dev));
  MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  size_t blocks = ceil_div(bytes, kMinShare);
  if (blocks > (size_t)(2 * sms)) blocks = 2 * sms;
  const size_t share = ceil_div(ceil_div(bytes, blocks), 16) * 16;
  blocks = ceil_div(bytes, share);
  put_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>((char *)dst, (const char *)src, bytes,
                                                        share, peer);
  MGPU_KERNEL();
}
