/*
 * Variant ignores-peer: the reference, but the kernel puts to (my PE + 1) mod (number of PEs),
 * which it computes itself, and ignores the argument `peer`. While the driver only ever sent
 * around the ring, `peer` was that PE and this passed on any PE count. The driver's third
 * iteration asks every PE to put to itself: this put lands in the next PE's dst instead.
 * Expected to fail at correctness.
 */
#include "put-bandwidth.h"

namespace {

constexpr int kThreads = 512;
constexpr size_t kAlign = 16;                   // every share starts 16-byte aligned
constexpr size_t kMinShare = size_t(64) << 10;  // small transfers use fewer blocks

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

__global__ void put_kernel(char *dst, const char *src, size_t bytes, size_t share, int peer) {
  (void)peer;
  peer = (nvshmem_my_pe() + 1) % nvshmem_n_pes(); // the next PE, computed here
  const size_t begin = (size_t)blockIdx.x * share;  // the same for the whole block
  if (begin < bytes) {
    const size_t len = bytes - begin < share ? bytes - begin : share;
    nvshmemx_putmem_nbi_block(dst + begin, src + begin, len, peer);
  }
  nvshmem_quiet();
}

int max_blocks() {
  static int blocks = 0;  // per process: one GPU per PE
  if (blocks == 0) {
    int dev = 0, sms = 0;
    MGPU_CUDA(cudaGetDevice(&dev));
    MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    blocks = 2 * sms;
  }
  return blocks;
}

}  // namespace

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  if (bytes == 0) return;
  size_t blocks = ceil_div(bytes, kMinShare);
  if (blocks > (size_t)max_blocks()) blocks = (size_t)max_blocks();
  const size_t share = ceil_div(ceil_div(bytes, blocks), kAlign) * kAlign;
  blocks = ceil_div(bytes, share);  // rounding the share up may leave the last blocks idle
  put_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>((char *)dst, (const char *)src, bytes,
                                                        share, peer);
  MGPU_KERNEL();
}
