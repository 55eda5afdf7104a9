/*
 * overlap.cu — variant edges-before-wait of module2/jacobi-overlap (a planted mistake).
 *
 * The reference solution, except that the edge rows are queued right after the interior,
 * before MPI_Waitall: the kernel may run before the neighbour's row has arrived and read the
 * halo that is there (last-but-one iteration's, or the driver's NaN). When the neighbour is
 * on time it usually gets away with it; the driver makes some ranks call 40 ms late, so the
 * edge rows of their neighbours are computed from a halo that has not arrived, every time.
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

    jac_compute(g, in, out, 2, g->rows - 1, stream); // the interior, while the halos travel
    jac_compute_edges(g, in, out, stream);           // MISTAKE: the halos may not be here yet

    MGPU_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
  }
}
