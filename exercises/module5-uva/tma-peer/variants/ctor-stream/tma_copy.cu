// module5/tma-peer, variant ctor-stream: creates a stream (and two events) in a global
// constructor, before main, when the current context is GPU 0's primary one: every SM. On GPU 0
// (the GPU the timing uses) tma_copy forks that stream from `stream` with an event, launches a
// 16-byte copy kernel over every SM of the GPU on it and joins it back; the current context is
// never changed, so the driver's check at the end of the call sees the green context still
// current. Elsewhere it copies within the limit. The SM limit is escaped without cudaSetDevice
// or a thread; the policy stage must refuse the stream creation (cudaStreamCreate*): tma_copy
// launches on the `stream` it is given.
#include <stdint.h>

#include "tma_peer.h"

__global__ void copy16(char *dst, const char *src, size_t head, size_t words, size_t tail) {
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const uint4 *s = reinterpret_cast<const uint4 *>(src + head);
  uint4 *d = reinterpret_cast<uint4 *>(dst + head);
  for (size_t i = tid; i < words; i += stride) d[i] = s[i];
  if (tid < head) dst[tid] = src[tid];
  if (tid < tail) dst[head + 16 * words + tid] = src[head + 16 * words + tid];
}

struct Outside {
  cudaStream_t s = nullptr;
  cudaEvent_t go = nullptr, done = nullptr;
  int sms = 0;
  Outside() {  // runs before main: GPU 0, primary context
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&go, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  }
};
static Outside outside;

void tma_copy(void *dst, const void *src, size_t bytes, int sms, cudaStream_t stream) {
  int dev = 0;
  MGPU_CUDA(cudaGetDevice(&dev));
  size_t head = (16 - (uintptr_t)src % 16) % 16;
  if (head > bytes) head = bytes;
  const size_t words = (bytes - head) / 16, tail = bytes - head - 16 * words;
  if (dev == 0 && outside.s) {
    MGPU_CUDA(cudaEventRecord(outside.go, stream));
    MGPU_CUDA(cudaStreamWaitEvent(outside.s, outside.go, 0));
    copy16<<<2 * outside.sms, 1024, 0, outside.s>>>((char *)dst, (const char *)src, head, words, tail);
    MGPU_KERNEL();
    MGPU_CUDA(cudaEventRecord(outside.done, outside.s));
    MGPU_CUDA(cudaStreamWaitEvent(stream, outside.done, 0));
    return;
  }
  copy16<<<2 * sms, 1024, 0, stream>>>((char *)dst, (const char *)src, head, words, tail);
  MGPU_KERNEL();
}
