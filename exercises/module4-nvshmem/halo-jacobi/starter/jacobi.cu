/*
 * jacobi.cu — module4/halo-jacobi.
 *
 * What is here: a kernel that computes one iteration of this PE's rows from its own slab, and
 * the loop that launches it. What is missing is everything between the PEs:
 *
 *   1. halo_setup: allocate the signal words your neighbours will update, in the symmetric heap
 *      (nvshmem_calloc), and point g->sig at them. Free them in halo_teardown.
 *   2. Send: after a block has computed its part of this PE's FIRST row, put it into the bottom
 *      halo row of the PE above (pe - 1); its LAST row goes into the top halo row (row 0) of the
 *      PE below (pe + 1). Same symmetric address on every PE: the pointer is your own `out`, the
 *      PE number says whose copy. The PE above owns halo_rows_of(pe - 1, ...) rows: its bottom
 *      halo is the row after those.
 *   3. Signal: let the neighbour know the data has landed — after the data, never before
 *      (nvshmemx_putmem_signal_block does both, in that order).
 *   4. Wait: before reading a halo row in iteration k, wait until the neighbour's iteration k-1
 *      rows have arrived. Which signal value says exactly that, in iteration k and not in any
 *      earlier one?
 *   5. The first PE has no PE above, the last none below: their outer halo rows are the fixed
 *      boundary, which nobody sends.
 *
 * As shipped, halo_setup allocates nothing (g->sig stays NULL) and nothing is exchanged: the
 * driver stops at the signal check, and without it the halos would still hold NaN and stale rows.
 */
#include "halo-jacobi.h"

namespace {

constexpr int kThreads = 256;

} // namespace

struct halo_state {
  int unused;
};

/* One iteration of this PE's rows 1 .. rows: one thread per column of one row (a 2-D grid:
 * x over columns, y over rows). No communication yet. */
__global__ void local_step(const float *in, float *out, int nx, int rows) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = 1 + (int)blockIdx.y;
  if (c < nx && r <= rows) out[(size_t)r * nx + c] = halo_point(in, nx, r, c);
}

void halo_setup(halo_grid *g) {
  /* TODO: g->sig = (uint64_t *)nvshmem_calloc(...); g->nsig = ...; */
  g->sig = nullptr;
  g->nsig = 0;
  g->state = nullptr;
}

void halo_jacobi(const halo_grid *g, long long first_iter, int iters, cudaStream_t stream) {
  const dim3 grid((unsigned)((g->nx + kThreads - 1) / kThreads), (unsigned)g->rows);
  for (long long k = first_iter; k < first_iter + iters; k++) {
    const float *in = g->slab[k & 1];
    float *out = g->slab[(k + 1) & 1];
    local_step<<<grid, kThreads, 0, stream>>>(in, out, g->nx, g->rows);
    MGPU_KERNEL();
    /* TODO: the halo rows of `out` on the neighbours, ordered with signals. */
  }
}

void halo_teardown(halo_grid *g) {
  /* TODO: free what halo_setup allocated (nvshmem_free is collective). */
  g->sig = nullptr;
}
