// module5/tma-peer, variant memcpy-3d-peer: the copy engine through cudaMemcpy3DPeerAsync (a
// bytes x 1 x 1 box), a spelling the forbid list did not name: no SM at all, right bytes in
// order at copy-engine speed (ratio ~1.0, under suspect_above 1.1): it passed every stage. The
// policy stage must refuse it (the pattern cudaMemcpy*).
#include "tma_peer.h"

void tma_copy(void *dst, const void *src, size_t bytes, int sms, cudaStream_t stream) {
  int here = 0, ndev = 0;
  (void)sms;
  MGPU_CUDA(cudaGetDevice(&here));
  MGPU_CUDA(cudaGetDeviceCount(&ndev));
  cudaMemcpy3DPeerParms p = {};
  p.srcPtr = make_cudaPitchedPtr(const_cast<void *>(src), bytes, bytes, 1);
  p.srcDevice = here;
  p.dstPtr = make_cudaPitchedPtr(dst, bytes, bytes, 1);
  p.dstDevice = (here + 1) % ndev;
  p.extent = make_cudaExtent(bytes, 1, 1);
  MGPU_CUDA(cudaMemcpy3DPeerAsync(&p, stream));
}
