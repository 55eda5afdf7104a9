// module5/peer-stores, variant memcpy-3d: the copy engine through a spelling the forbid list did
// not name: cudaMemcpy3DAsync of a bytes x 1 x 1 box, pitched pointers over dst and src, on
// `stream`. Right bytes, right order, copy-engine speed (ratio ~1.0, under suspect_above 1.1):
// it passed every stage. The policy stage must refuse it (the pattern cudaMemcpy*).
#include "peer_stores.h"

void sm_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(const_cast<void *>(src), bytes, bytes, 1);
  p.dstPtr = make_cudaPitchedPtr(dst, bytes, bytes, 1);
  p.extent = make_cudaExtent(bytes, 1, 1);
  p.kind = cudaMemcpyDefault;
  MGPU_CUDA(cudaMemcpy3DAsync(&p, stream));
}
