// module5/peer-stores, variant pull-from-peer: the kernel runs on the destination GPU and loads
// src over NVLink (a pull), not on the current GPU storing into the peer (a push). It waits for
// `stream` with an event and `stream` waits for it, so the bytes arrive in order; on two GPUs
// peer access is on both ways (0 -> 1 and 1 -> 0 are both ring links), so it passed every stage.
// With three GPUs or more the destination has no access to src and the load faults. The
// policy stage must refuse cudaSetDevice: the kernel runs on the current GPU.
#include <stdint.h>

#include "peer_stores.h"

enum { kMaxDevices = 64 };

__global__ void pull_kernel(char *dst, const char *src, size_t head, size_t words, size_t tail) {
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const uint4 *s = reinterpret_cast<const uint4 *>(src + head);
  uint4 *d = reinterpret_cast<uint4 *>(dst + head);
  for (size_t i = tid; i < words; i += stride) d[i] = s[i];
  if (tid < head) dst[tid] = src[tid];
  if (tid < tail) dst[head + 16 * words + tid] = src[head + 16 * words + tid];
}

void sm_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  static cudaStream_t remote[kMaxDevices];
  static cudaEvent_t go[kMaxDevices], done[kMaxDevices];
  int here = 0, sms = 0, ndev = 0;
  MGPU_CUDA(cudaGetDevice(&here));
  MGPU_CUDA(cudaGetDeviceCount(&ndev));
  cudaPointerAttributes a;
  MGPU_CUDA(cudaPointerGetAttributes(&a, dst));
  const int there = a.device;  // dst's GPU
  if (!go[here]) MGPU_CUDA(cudaEventCreateWithFlags(&go[here], cudaEventDisableTiming));
  MGPU_CUDA(cudaEventRecord(go[here], stream));
  MGPU_CUDA(cudaSetDevice(there));
  if (!remote[there]) {
    MGPU_CUDA(cudaStreamCreateWithFlags(&remote[there], cudaStreamNonBlocking));
    MGPU_CUDA(cudaEventCreateWithFlags(&done[there], cudaEventDisableTiming));
  }
  MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, there));
  MGPU_CUDA(cudaStreamWaitEvent(remote[there], go[here], 0));
  size_t head = (16 - (uintptr_t)src % 16) % 16;
  if (head > bytes) head = bytes;
  const size_t words = (bytes - head) / 16, tail = bytes - head - 16 * words;
  size_t grid = (words + 1023) / 1024;
  if (grid > (size_t)(2 * sms)) grid = 2 * sms;
  if (grid < 1) grid = 1;
  pull_kernel<<<(unsigned)grid, 1024, 0, remote[there]>>>((char *)dst, (const char *)src, head, words, tail);
  MGPU_KERNEL();
  MGPU_CUDA(cudaEventRecord(done[there], remote[there]));
  MGPU_CUDA(cudaSetDevice(here));
  MGPU_CUDA(cudaStreamWaitEvent(stream, done[there], 0));
  (void)ndev;
}
