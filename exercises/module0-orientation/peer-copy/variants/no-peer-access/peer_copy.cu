// module0/peer-copy variant: a correct copy on the right stream, but peer access is never
// enabled. cudaMemcpyPeerAsync still delivers the bytes, staged through host memory, at a
// fraction of NVLink's speed.
#include "peer_copy.h"

void peer_copy_setup(int src_dev, int dst_dev) {
  int ok = 0;
  MGPU_CUDA(cudaDeviceCanAccessPeer(&ok, src_dev, dst_dev));  // asks, but never enables
}

void peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes,
               cudaStream_t stream) {
  MGPU_CUDA(cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, bytes, stream));
}
