// module5/peer-stores, variant graph-memcpy: the copy engine through a CUDA graph: a memcpy node
// (cudaGraphAddMemcpyNode1D), instantiated and launched on `stream`. No cudaMemcpy* call is
// made, the bytes arrive in order at copy-engine speed (ratio ~1.0, under suspect_above 1.1):
// it passed every stage. The policy stage must refuse the memcpy node (cudaGraphAddMemcpyNode*).
#include "peer_stores.h"

void sm_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  cudaGraph_t g;
  cudaGraphNode_t node;
  cudaGraphExec_t exec;
  MGPU_CUDA(cudaGraphCreate(&g, 0));
  MGPU_CUDA(cudaGraphAddMemcpyNode1D(&node, g, NULL, 0, dst, src, bytes, cudaMemcpyDefault));
  MGPU_CUDA(cudaGraphInstantiate(&exec, g, 0));
  MGPU_CUDA(cudaGraphLaunch(exec, stream));
  MGPU_CUDA(cudaGraphExecDestroy(exec));  // destruction waits for nothing: the launch completes
  MGPU_CUDA(cudaGraphDestroy(g));
}
