/*
 * jacobi.cu — variant host-put-on-stream of module4/halo-jacobi (a planted mistake).
 *
 * Correct results, but the exchange is driven by the host: the kernel only computes, and after
 * it the host queues the edge rows on the stream with nvshmemx_putmem_signal_on_stream (the
 * data, then the neighbour's signal word), and before the next iteration a wait on the stream,
 * nvshmemx_signal_wait_until_on_stream. Nothing is put from the kernel, which is what the
 * exercise asks for. The policy stage refuses the host's on-stream puts.
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
  int unused;
};

void halo_setup(halo_grid *g) {
  // Collective; zeroed. Word 0 counts the rows received in the top halo, word 1 in the bottom.
  g->sig = static_cast<uint64_t *>(nvshmem_calloc(2, sizeof(uint64_t)));
  if (g->sig == nullptr)
    mgpu_fail("learner", "nvshmem_calloc", __FILE__, __LINE__, 0,
              "no room for 2 signal words in the symmetric heap");
  g->nsig = 2;
  g->state = nullptr;
}

void halo_jacobi(const halo_grid *g, long long first_iter, int iters, cudaStream_t stream) {
  const int top = g->pe > 0 ? g->pe - 1 : -1;
  const int bottom = g->pe < g->npes - 1 ? g->pe + 1 : -1;
  const int top_rows = top >= 0 ? halo_rows_of(top, g->npes, g->ny) : 0;
  const size_t nx = (size_t)g->nx, row = nx * sizeof(float);
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
    // MISTAKE: the host puts the rows after the kernel, instead of the kernel's edge blocks.
    if (top >= 0) // our first row -> the bottom halo (row top_rows + 1) of the PE above
      nvshmemx_putmem_signal_on_stream(out + (size_t)(top_rows + 1) * nx, out + nx, row,
                                       &g->sig[1], 1, NVSHMEM_SIGNAL_ADD, top, stream);
    if (bottom >= 0) // our last row -> the top halo (row 0) of the PE below
      nvshmemx_putmem_signal_on_stream(out, out + (size_t)g->rows * nx, row, &g->sig[0], 1,
                                       NVSHMEM_SIGNAL_ADD, bottom, stream);
  }
}

void halo_teardown(halo_grid *g) {
  nvshmem_free(g->sig);
  g->sig = nullptr;
}
