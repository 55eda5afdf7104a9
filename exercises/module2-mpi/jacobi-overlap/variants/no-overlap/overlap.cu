/*
 * overlap.cu — variant no-overlap of module2/jacobi-overlap (a planted mistake).
 *
 * Correct, but the interior waits for the halos: MPI_Waitall comes before any kernel, so the
 * GPU idles while the rows travel and the host waits for them. Non-blocking calls used like a
 * blocking MPI_Sendrecv: no faster than the blocking baseline.
 */
#include "jacobi-overlap.h"

namespace {
constexpr int kTagUp = 1;   // a rank's first row, travelling to the rank above
constexpr int kTagDown = 2; // a rank's last row, travelling to the rank below
} // namespace

void jacobi_overlap(const jac_grid *g, long long first_iter, int iters, cudaStream_t stream,
                    MPI_Comm comm) {
  const int top = g->rank > 0 ? g->rank - 1 : MPI_PROC_NULL;
  const int bottom = g->rank < g->world - 1 ? g->rank + 1 : MPI_PROC_NULL;
  const int nx = g->nx;
  const size_t row = (size_t)nx;
  for (long long k = first_iter; k < first_iter + iters; k++) {
    float *in = g->slab[k & 1];
    float *out = g->slab[(k + 1) & 1];
    MPI_Request req[4];

    MGPU_CUDA(cudaStreamSynchronize(stream));
    MGPU_MPI(MPI_Irecv(in, nx, MPI_FLOAT, top, kTagDown, comm, &req[0]));
    MGPU_MPI(MPI_Irecv(in + (g->rows + 1) * row, nx, MPI_FLOAT, bottom, kTagUp, comm, &req[1]));
    MGPU_MPI(MPI_Isend(in + row, nx, MPI_FLOAT, top, kTagUp, comm, &req[2]));
    MGPU_MPI(MPI_Isend(in + g->rows * row, nx, MPI_FLOAT, bottom, kTagDown, comm, &req[3]));

    MGPU_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE)); // MISTAKE: nothing runs meanwhile

    jac_compute(g, in, out, 2, g->rows - 1, stream);
    jac_compute_edges(g, in, out, stream);
  }
}
