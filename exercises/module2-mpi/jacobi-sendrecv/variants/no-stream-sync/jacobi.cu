// module2/jacobi-sendrecv — variant no-stream-sync: the reference without the stream
// synchronization before MPI_Sendrecv. MPI reads the edge rows while the stencil that computes
// them is still queued (behind the driver's delay, on the ranks that start late): it sends the
// rows of an earlier iteration.
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
    (void)stream; // "MPI_Sendrecv is blocking": it blocks on MPI, not on the GPU
    // My first row goes up into the bottom halo of the rank above; the bottom halo comes from
    // the first row of the rank below.
    MGPU_MPI(MPI_Sendrecv(in + nx, nx, MPI_FLOAT, up, 0,
                          in + (size_t)(rows + 1) * nx, nx, MPI_FLOAT, down, 0,
                          g->comm, MPI_STATUS_IGNORE));
    // My last row goes down into the top halo of the rank below; the top halo comes from the
    // last row of the rank above.
    MGPU_MPI(MPI_Sendrecv(in + (size_t)rows * nx, nx, MPI_FLOAT, down, 1,
                          in, nx, MPI_FLOAT, up, 1,
                          g->comm, MPI_STATUS_IGNORE));
    // MPI_Sendrecv has returned: the halos are in device memory, and the stencil may read them.
    jac_stencil(in, out, nx, rows, stream);
  }
}
