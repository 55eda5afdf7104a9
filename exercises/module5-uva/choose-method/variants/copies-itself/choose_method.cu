// module5/choose-method, variant copies-itself: warms the link with a peer copy of its own
// before deciding. The decision is the driver's to carry out; the copy engine is the driver's.
#include "choose_method.h"

method choose_method(size_t bytes, const machine_info *m) {
  static bool warmed = false;
  if (!warmed && !m->same_gpu) {
    void *a = nullptr, *b = nullptr;
    MGPU_CUDA(cudaSetDevice(1));
    MGPU_CUDA(cudaMalloc(&b, 4096));
    MGPU_CUDA(cudaSetDevice(0));
    MGPU_CUDA(cudaMalloc(&a, 4096));
    MGPU_CUDA(cudaMemcpyPeerAsync(b, 1, a, 0, 4096, 0));
    MGPU_CUDA(cudaDeviceSynchronize());
    warmed = true;
  }
  return bytes < 65536 ? SM_STORES : COPY_ENGINE;
}
