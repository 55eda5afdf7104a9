/*
 * Variant no-join: the reference kernel on a private stream that waits for the caller's stream
 * at the start (src is ready) but is never joined back: the caller's stream is "done" while the
 * put is still running. The driver then compares the receiving PE's dst and finds the large
 * cases still partly poisoned. Expected to fail at correctness.
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
cudaEvent_t ready = nullptr;

}  // namespace

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  if (!side) {
    MGPU_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    MGPU_CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  }
  int dev = 0, sms = 0;
  MGPU_CUDA(cudaGetDevice(&dev));
  MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  size_t blocks = ceil_div(bytes, kMinShare);
  if (blocks > (size_t)(2 * sms)) blocks = 2 * sms;
  const size_t share = ceil_div(ceil_div(bytes, blocks), 16) * 16;
  blocks = ceil_div(bytes, share);
  MGPU_CUDA(cudaEventRecord(ready, stream));
  MGPU_CUDA(cudaStreamWaitEvent(side, ready, 0));
  put_kernel<<<(unsigned)blocks, 512, 0, side>>>((char *)dst, (const char *)src, bytes, share, peer);
  MGPU_KERNEL();
  /* Missing: an event recorded on `side` that `stream` waits for. */
}
