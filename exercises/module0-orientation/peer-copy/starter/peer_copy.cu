// module0/peer-copy: your code. The driver calls these two functions; see task.md.
#include "peer_copy.h"

void peer_copy_setup(int src_dev, int dst_dev) {
  // TODO: make direct GPU-to-GPU copies possible in this process. For each direction, ask
  //       whether the hardware allows it (cudaDeviceCanAccessPeer) and, if so, enable it
  //       (cudaSetDevice(from); cudaDeviceEnablePeerAccess(to, 0)). Check every call with
  //       MGPU_CUDA(...).
  (void)src_dev;
  (void)dst_dev;
}

void peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes,
               cudaStream_t stream) {
  // TODO: queue the copy of `bytes` bytes from src (on src_dev) to dst (on dst_dev) on
  //       `stream`, and return without waiting for it (cudaMemcpyPeerAsync).
  (void)dst;
  (void)dst_dev;
  (void)src;
  (void)src_dev;
  (void)bytes;
  (void)stream;
}
