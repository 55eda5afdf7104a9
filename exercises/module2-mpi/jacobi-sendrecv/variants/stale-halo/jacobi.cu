// module2/jacobi-sendrecv — variant stale-halo: computes first and exchanges after, the halos
// of `out` for the next iteration. Every later iteration then finds its halos in place, but
// the first one computes with halo rows that nobody has sent yet (the driver leaves them NaN):
// the edge rows are wrong from iteration 0 on, and the error spreads inwards.
#include "jacobi-sendrecv.h"

void jacobi_run(const jac_grid *g, long long first_iter, int iters, cudaStream_t stream) {
  const int nx = g->nx, rows = g->rows;
  // The grid's edges have no neighbour: MPI_PROC_NULL turns those halves of MPI_Sendrecv into
  // no-ops, so every rank runs the same code.
  const int up = g->rank > 0 ? g->rank - 1 : MPI_PROC_NULL;
  const int down = g->rank < g->world - 1 ? g->rank + 1 : MPI_PROC_NULL;

  for (long long k = first_iter; k < first_iter + iters; k++) {
    float *in = g->slab[k % 2], *out = g->slab[(k + 1) % 2];
    // The rows MPI is about to read were written by kernels queued on `stream` (the previous
    // iteration's stencil, or the driver's work): MPI does not wait for them.
    jac_stencil(in, out, nx, rows, stream); // reads in's halos: are they there?
    MGPU_CUDA(cudaStreamSynchronize(stream));
    MGPU_MPI(MPI_Sendrecv(out + nx, nx, MPI_FLOAT, up, 0,
                          out + (size_t)(rows + 1) * nx, nx, MPI_FLOAT, down, 0,
                          g->comm, MPI_STATUS_IGNORE));
    MGPU_MPI(MPI_Sendrecv(out + (size_t)rows * nx, nx, MPI_FLOAT, down, 1,
                          out, nx, MPI_FLOAT, up, 1,
                          g->comm, MPI_STATUS_IGNORE));
  }
}
