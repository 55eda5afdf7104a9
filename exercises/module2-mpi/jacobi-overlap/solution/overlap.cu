/*
 * overlap.cu — reference solution for module2/jacobi-overlap.
 *
 * Per iteration k (in = slab[k % 2], out = slab[(k + 1) % 2]):
 *   1. cudaStreamSynchronize: in's rows were written by work on the stream (the previous
 *      iteration's edge kernel, or the driver's copy). MPI reads device memory directly and
 *      knows nothing about streams, so that work must be finished before MPI is handed the rows.
 *   2. MPI_Irecv into in's two halo rows, MPI_Isend of in's first and last row. At the ends of
 *      the grid the neighbour is MPI_PROC_NULL: those calls complete at once and touch nothing,
 *      so the fixed boundary rows stay as they are.
 *   3. The interior (rows 2 .. rows-1) reads no halo row: queued now, it runs on the GPU while
 *      the rows are in flight. Empty when the rank owns one or two rows.
 *   4. MPI_Waitall: the halos have arrived and our rows have been taken. No request may
 *      outlive the iteration: the next one writes the other slab, but the one after writes
 *      this one again.
 *   5. The edge rows, which read the halos, queued after the wait.
 * Tags say the direction a row travels, so the two messages between the same pair of ranks
 * (one each way) can never be matched with each other's receive, even on two ranks where the
 * neighbour above of one is the neighbour below of the other.
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

    MGPU_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
    jac_compute_edges(g, in, out, stream); // rows 1 and rows, now that the halos are in
  }
}
