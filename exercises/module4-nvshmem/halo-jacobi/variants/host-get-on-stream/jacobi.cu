/*
 * jacobi.cu — variant host-get-on-stream of module4/halo-jacobi (a planted mistake).
 *
 * Correct results, but the halos are fetched by the host: after the stencil kernel, a barrier
 * over all PEs on the stream (nvshmemx_barrier_all_on_stream: every PE's rows of this iteration
 * are computed), then nvshmemx_getmem_on_stream pulls the neighbours' edge rows into this PE's
 * halos. The next iteration's barrier keeps a neighbour from overwriting a row before it has
 * been read. Nothing is put from the kernel, which is what the exercise asks for. The policy
 * stage refuses the host's on-stream gets.
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
  // Allocated as the task asks; this version orders with barriers and never uses them.
  g->sig = static_cast<uint64_t *>(nvshmem_calloc(2, sizeof(uint64_t)));
  if (g->sig == nullptr)
    mgpu_fail("learner", "nvshmem_calloc", __FILE__, __LINE__, 0, "no room for 2 signal words");
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
    local_step<<<grid, kThreads, 0, stream>>>(in, out, g->nx, g->rows);
    MGPU_KERNEL();
    // MISTAKE: the host pulls the neighbours' rows after a barrier over all PEs.
    nvshmemx_barrier_all_on_stream(stream);
    if (top >= 0) // the last row of the PE above -> our top halo (row 0)
      nvshmemx_getmem_on_stream(out, out + (size_t)top_rows * nx, row, top, stream);
    if (bottom >= 0) // the first row of the PE below -> our bottom halo (row rows + 1)
      nvshmemx_getmem_on_stream(out + (size_t)(g->rows + 1) * nx, out + nx, row, bottom, stream);
  }
}

void halo_teardown(halo_grid *g) {
  nvshmem_free(g->sig);
  g->sig = nullptr;
}
