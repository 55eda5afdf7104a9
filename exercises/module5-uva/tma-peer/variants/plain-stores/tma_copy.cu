// module5/tma-peer, variant plain-stores: module 5's peer-stores kernel (16-byte loads and
// stores in a grid-stride loop) on the same `sms` SMs, and no bulk copy at all. Its bytes are
// right, and int4 stores from 8 SMs measured 346 GB/s against the copy engine's 397 on 2xH200
// (../shared/FACTS.md): 0.87, inside the target. Only the PTX shows that the TMA never ran.
// Must fail at policy (ptx_requires).
#include <stdint.h>

#include "tma_peer.h"

__global__ void store_kernel(char *dst, const char *src, size_t head, size_t words, size_t tail) {
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const uint4 *s = reinterpret_cast<const uint4 *>(src + head);
  uint4 *d = reinterpret_cast<uint4 *>(dst + head);
  for (size_t i = tid; i < words; i += stride) d[i] = s[i];
  if (tid < head) dst[tid] = src[tid];
  if (tid < tail) dst[head + 16 * words + tid] = src[head + 16 * words + tid];
}

void tma_copy(void *dst, const void *src, size_t bytes, int sms, cudaStream_t stream) {
  size_t head = (16 - (uintptr_t)src % 16) % 16;
  if (head > bytes) head = bytes;
  const size_t words = (bytes - head) / 16;
  const size_t tail = bytes - head - 16 * words;
  // Two blocks of 1024 threads per SM of the limit.
  store_kernel<<<2 * sms, 1024, 0, stream>>>((char *)dst, (const char *)src, head, words, tail);
  MGPU_KERNEL();
}
