/*
 * Variant one-block: the whole transfer from a single block of 1024 threads. Every byte arrives
 * (correct at all sizes), but one SM cannot keep enough stores in flight to fill NVLink:
 * measured on 2xH200 (course FACTS), one block moved 19-20 GB/s with putmem_nbi_block and
 * 512 threads, 36.7 GB/s with putmem_block and 1024 threads, against the copy engine's ~397.
 * Expected to fail at performance.
 */
#include "put-bandwidth.h"

namespace {

__global__ void put_kernel(void *dst, const void *src, size_t bytes, int peer) {
  nvshmemx_putmem_nbi_block(dst, src, bytes, peer);
  nvshmem_quiet();
}

}  // namespace

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  put_kernel<<<1, 1024, 0, stream>>>(dst, src, bytes, peer);
  MGPU_KERNEL();
}
