// module0/peer-copy variant: enables peer access and copies the right bytes, but on a stream of
// its own, so the copy is not ordered after the work queued on `stream` before it.
#include "peer_copy.h"

static cudaStream_t g_side;

void peer_copy_setup(int src_dev, int dst_dev) {
  MGPU_CUDA(cudaSetDevice(src_dev));
  MGPU_CUDA(cudaDeviceEnablePeerAccess(dst_dev, 0));
  MGPU_CUDA(cudaSetDevice(dst_dev));
  MGPU_CUDA(cudaDeviceEnablePeerAccess(src_dev, 0));
  MGPU_CUDA(cudaSetDevice(src_dev));
  MGPU_CUDA(cudaStreamCreate(&g_side));
}

void peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes,
               cudaStream_t stream) {
  (void)stream;  // "my own stream is as good as theirs"
  MGPU_CUDA(cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, bytes, g_side));
}
