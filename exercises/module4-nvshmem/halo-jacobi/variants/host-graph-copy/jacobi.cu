/*
 * jacobi.cu — variant host-graph-copy of module4/halo-jacobi (a planted mistake).
 *
 * Variant host-memcpy-ptr without a cudaMemcpy call: the two edge-row copies of each slab
 * parity are memcpy nodes of a CUDA graph (cudaGraphAddMemcpyNode1D, to the neighbours' halos
 * through nvshmem_ptr), built once and launched on the stream after every stencil kernel, with
 * nvshmemx_signal_op_on_stream after it and nvshmemx_signal_wait_until_on_stream before the next
 * iteration. Correct results, and still the copy engine queued by the host, not the kernel. The
 * policy stage refuses the graph calls (cudaGraph*).
 */
#include "halo-jacobi.h"

namespace {

constexpr int kThreads = 256;

} // namespace

/* One iteration of this PE's rows 1 .. rows: one thread per column of one row. No
 * communication in the kernel: the host moves the rows afterwards. */
__global__ void local_step(const float *in, float *out, int nx, int rows) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = 1 + (int)blockIdx.y;
  if (c < nx && r <= rows) out[(size_t)r * nx + c] = halo_point(in, nx, r, c);
}

struct halo_state {
  cudaGraph_t graph[2];
  cudaGraphExec_t exec[2]; // exec[p]: copies the edge rows of slab[p] into the neighbours' halos
};

void halo_setup(halo_grid *g) {
  // Collective; zeroed. Word 0 counts the rows received in the top halo, word 1 in the bottom.
  g->sig = static_cast<uint64_t *>(nvshmem_calloc(2, sizeof(uint64_t)));
  if (g->sig == nullptr)
    mgpu_fail("learner", "nvshmem_calloc", __FILE__, __LINE__, 0,
              "no room for 2 signal words in the symmetric heap");
  g->nsig = 2;
  const int top = g->pe > 0 ? g->pe - 1 : -1;
  const int bottom = g->pe < g->npes - 1 ? g->pe + 1 : -1;
  const int top_rows = top >= 0 ? halo_rows_of(top, g->npes, g->ny) : 0;
  const size_t nx = (size_t)g->nx, row = nx * sizeof(float);
  halo_state *st = new halo_state;
  for (int p = 0; p < 2; p++) {
    float *out = g->slab[p];
    cudaGraphNode_t node;
    MGPU_CUDA(cudaGraphCreate(&st->graph[p], 0));
    if (top >= 0)
      MGPU_CUDA(cudaGraphAddMemcpyNode1D(
          &node, st->graph[p], nullptr, 0, nvshmem_ptr(out + (size_t)(top_rows + 1) * nx, top),
          out + nx, row, cudaMemcpyDeviceToDevice));
    if (bottom >= 0)
      MGPU_CUDA(cudaGraphAddMemcpyNode1D(&node, st->graph[p], nullptr, 0, nvshmem_ptr(out, bottom),
                                         out + (size_t)g->rows * nx, row,
                                         cudaMemcpyDeviceToDevice));
    MGPU_CUDA(cudaGraphInstantiate(&st->exec[p], st->graph[p], 0));
  }
  g->state = st;
}

void halo_jacobi(const halo_grid *g, long long first_iter, int iters, cudaStream_t stream) {
  const int top = g->pe > 0 ? g->pe - 1 : -1;
  const int bottom = g->pe < g->npes - 1 ? g->pe + 1 : -1;
  const halo_state *st = g->state;
  const dim3 grid((unsigned)((g->nx + kThreads - 1) / kThreads), (unsigned)g->rows);
  for (long long k = first_iter; k < first_iter + iters; k++) {
    const float *in = g->slab[k & 1];
    float *out = g->slab[(k + 1) & 1];
    if (k > 0) { // the neighbours' rows of iteration k - 1 are in `in`'s halos
      if (top >= 0)
        nvshmemx_signal_wait_until_on_stream(&g->sig[0], NVSHMEM_CMP_GE, (uint64_t)k, stream);
      if (bottom >= 0)
        nvshmemx_signal_wait_until_on_stream(&g->sig[1], NVSHMEM_CMP_GE, (uint64_t)k, stream);
    }
    local_step<<<grid, kThreads, 0, stream>>>(in, out, g->nx, g->rows);
    MGPU_KERNEL();
    // MISTAKE: a graph of copy-engine copies, launched by the host.
    MGPU_CUDA(cudaGraphLaunch(st->exec[(k + 1) & 1], stream));
    if (top >= 0) nvshmemx_signal_op_on_stream(&g->sig[1], 1, NVSHMEM_SIGNAL_ADD, top, stream);
    if (bottom >= 0)
      nvshmemx_signal_op_on_stream(&g->sig[0], 1, NVSHMEM_SIGNAL_ADD, bottom, stream);
  }
}

void halo_teardown(halo_grid *g) {
  for (int p = 0; p < 2; p++) {
    MGPU_CUDA(cudaGraphExecDestroy(g->state->exec[p]));
    MGPU_CUDA(cudaGraphDestroy(g->state->graph[p]));
  }
  delete g->state;
  g->state = nullptr;
  nvshmem_free(g->sig);
  g->sig = nullptr;
}
