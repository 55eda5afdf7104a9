// module0/timing variant: runs the copy once, then returns a figure from a data sheet instead of
// a measurement. It happens to be near what cudaMemcpyAsync reaches, but the driver also times a
// slower copy kernel, and one made-up number cannot match both.
#include "timing.h"

double time_copy_gbps(copy_op op, void *arg, size_t bytes, cudaStream_t stream) {
  (void)bytes;
  op(arg, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  return 2000.0;  // "about what a local copy does"
}
