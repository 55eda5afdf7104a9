/*
 * put.cu — reference solution for module4/put-bandwidth.
 *
 * One kernel, many blocks. The bytes are cut into one share per block (a multiple of 16 bytes,
 * the last share shorter); each block hands its share to nvshmemx_putmem_nbi_block, which
 * spreads the copy over the block's threads. Over NVLink the "put" is the threads storing into
 * the peer's memory through the peer mapping NVSHMEM set up, so the bandwidth comes from having
 * enough stores in flight: enough blocks on every SM.
 *
 * _nbi lets each thread move on without waiting for its stores to be acknowledged; the
 * nvshmem_quiet at the end is what waits for them. It is what guarantees the contract ("every
 * byte has arrived when the stream passes this work") under any transport, not just NVLink.
 *
 * Blocks: two per SM (264 on an H200). Measured on 2xH200 (course FACTS, 2026-11-24, NVSHMEM 3.4.5,
 * putmem_nbi_block + quiet, 256 MiB, 512 threads a block): 1 / 8 / 32 / 132 / 264 blocks gave
 * 18.8 / 158 / 304 / 172 / 359 GB/s — note the dip at exactly one block per SM, not explained.
 */
#include "put-bandwidth.h"

namespace {

constexpr int kThreads = 512;
constexpr size_t kAlign = 16;                   // every share starts 16-byte aligned
constexpr size_t kMinShare = size_t(64) << 10;  // small transfers use fewer blocks

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

__global__ void put_kernel(char *dst, const char *src, size_t bytes, size_t share, int peer) {
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
