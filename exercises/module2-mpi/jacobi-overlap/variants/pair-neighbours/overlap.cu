/*
 * overlap.cu — variant pair-neighbours of module2/jacobi-overlap (a planted mistake).
 *
 * Takes its neighbour from the ping-pong's pairs: rank ^ 1, below an even rank and above an
 * odd one. On two ranks that is exactly right. On three, rank 1 never hears from rank 2 and
 * rank 2 from nobody; on four, ranks 1 and 2 never exchange. Every send still has its receive
 * (the pairs are symmetric), so nothing hangs: the halos that face the missing neighbour keep
 * the driver's NaN. The expectation is for a run on 3 or more GPUs.
 */
#include "jacobi-overlap.h"

namespace {
constexpr int kTagUp = 1;   // a rank's first row, travelling to the rank above
constexpr int kTagDown = 2; // a rank's last row, travelling to the rank below
} // namespace

void jacobi_overlap(const jac_grid *g, long long first_iter, int iters, cudaStream_t stream,
                    MPI_Comm comm) {
  // MISTAKE: the partner of the ping-pong, rank ^ 1, taken as the only neighbour.
  const int partner = (g->rank ^ 1) < g->world ? (g->rank ^ 1) : MPI_PROC_NULL;
  const int top = g->rank % 2 == 1 ? partner : MPI_PROC_NULL;
  const int bottom = g->rank % 2 == 0 ? partner : MPI_PROC_NULL;
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

    MGPU_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
    jac_compute_edges(g, in, out, stream); // rows 1 and rows, now that the halos are in
  }
}
