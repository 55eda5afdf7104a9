/*
 * Variant no-start-wait: the reference kernel on a private stream that is joined back into the
 * caller's stream at the end, but never waits for it at the start. The put runs at once, while
 * the driver's stream is still busy (a 20 ms sleep, then the fill of src): it sends whatever src
 * held before — poison in the first iteration, the previous iteration's bytes in the second.
 * Expected to fail at correctness.
 */
#include "put-bandwidth.h"

namespace {

constexpr size_t kMinShare = size_t(64) << 10;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

__global__ void put_kernel(char *dst, const char *src, size_t bytes, size_t share, int peer) {
  const size_t begin = (size_t)blockIdx.x * share;
  if (begin < bytes) {
    const size_t len = bytes - begin < share ? bytes - begin : share;
    nvshmemx_putmem_nbi_block(dst + begin, src + begin, len, peer);
  }
  nvshmem_quiet();
}

cudaStream_t side = nullptr;
cudaEvent_t done = nullptr;

}  // namespace

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  if (!side) {
    MGPU_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    MGPU_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  }
  int dev = 0, sms = 0;
  MGPU_CUDA(cudaGetDevice(&dev));
  MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  size_t blocks = ceil_div(bytes, kMinShare);
  if (blocks > (size_t)(2 * sms)) blocks = 2 * sms;
  const size_t share = ceil_div(ceil_div(bytes, blocks), 16) * 16;
  blocks = ceil_div(bytes, share);
  /* Missing: cudaStreamWaitEvent(side, <event recorded on stream>) before the launch. */
  put_kernel<<<(unsigned)blocks, 512, 0, side>>>((char *)dst, (const char *)src, bytes, share, peer);
  MGPU_KERNEL();
  MGPU_CUDA(cudaEventRecord(done, side));
  MGPU_CUDA(cudaStreamWaitEvent(stream, done, 0));
}
