/*
 * jacobi-overlap.h — module2/jacobi-overlap (course-owned: do not edit).
 *
 * A Jacobi-style stencil on a 2-D grid of floats, cut into slabs of rows, one slab per MPI
 * rank and GPU. Every iteration each rank needs one row from each neighbour (its halo rows).
 * You write the iteration so that the halo rows travel by non-blocking MPI while the GPU
 * computes the rows that do not need them.
 *
 * THE GRID
 *   ny interior rows (global rows 1 .. ny) and nx columns, plus two fixed boundary rows: global
 *   row 0 above and global row ny+1 below, which never change. Periodic in x: the left
 *   neighbour of column 0 is column nx-1. Not periodic in y: rank 0 has no rank above it and
 *   rank world-1 none below.
 *
 * THE SPLIT (jac_rows_of, jac_row0_of)
 *   Rank p owns jac_rows_of(p, world, ny) consecutive rows starting at global row
 *   jac_row0_of(p, world, ny); the first ny % world ranks own one row more. A rank may own a
 *   single row: then its first row is also its last.
 *
 * THE SLABS (g->slab[0], g->slab[1])
 *   Two device buffers on this rank's GPU, each (rows + 2) rows of nx floats, row r at
 *   slab + r * nx:
 *     row 0          top halo: a copy of the last row of rank - 1 (global row row0 - 1)
 *     rows 1 .. rows the rows this rank owns
 *     row rows + 1   bottom halo: a copy of the first row of rank + 1 (global row row0 + rows)
 *   On rank 0, row 0 of both slabs holds the fixed boundary row 0; on the last rank, row
 *   rows + 1 of both slabs holds the fixed boundary row ny + 1. The driver writes them; nobody
 *   else may (MPI_PROC_NULL as the neighbour there sends and receives nothing).
 *
 * ONE ITERATION k (k = 0, 1, 2, ... counted from the start of the run)
 *   in = slab[k % 2], out = slab[(k + 1) % 2]
 *   1. exchange: in's first and last row go to the neighbours; the neighbours' rows arrive in
 *      in's halo rows (row 0 and row rows + 1);
 *   2. compute: out[r][c] = jac_update(in[r-1][c], in[r+1][c], in[r][c-1], in[r][c+1]) for
 *      r = 1 .. rows. Rows 2 .. rows-1 (the interior) read no halo row; rows 1 and rows (the
 *      edges) do.
 *   Before iteration k, in's rows 1 .. rows hold the result of iteration k - 1; its halo rows
 *   that face a neighbour hold nothing useful (the driver may even have filled them with NaN).
 *
 * THE UPDATE RULE (jac_update)
 *   new = (up + down + left + right) mod 65521 on integer-valued floats in [0, 65521): exact in
 *   any order (the sum stays below 2^18, far inside float's exact integers), so the driver
 *   compares with tolerance 0; and it never converges, so a halo that is wrong once stays
 *   visible after a hundred iterations.
 */
#ifndef MODULE2_JACOBI_OVERLAP_H
#define MODULE2_JACOBI_OVERLAP_H

#include <stddef.h>

#include <mpi.h> /* before mgpu.h: turns on MGPU_MPI(call) */
#include <cuda_runtime.h>

#include "mgpu.h"

#define JAC_MODULUS 65521.0f

typedef struct jac_grid {
  int rank, world; /* this rank and the number of ranks, in the communicator you are given */
  int nx;          /* columns (periodic) */
  int ny;          /* interior rows of the whole grid */
  int rows;        /* rows this rank owns, >= 1 */
  int row0;        /* global row of this rank's first row (1 .. ny) */
  float *slab[2];  /* device, (rows + 2) x nx floats each, see above */
} jac_grid;

/* Rows rank p owns when ny rows are split over `world` ranks. */
static inline __host__ __device__ int jac_rows_of(int p, int world, int ny) {
  return ny / world + (p < ny % world ? 1 : 0);
}

/* Global row (1-based) of rank p's first row. */
static inline __host__ __device__ int jac_row0_of(int p, int world, int ny) {
  const int base = ny / world, extra = ny % world;
  return 1 + p * base + (p < extra ? p : extra);
}

/* The update rule: exact for integer-valued inputs in [0, JAC_MODULUS). NaN in, NaN out. */
static inline __host__ __device__ float jac_update(float up, float down, float left, float right) {
  float s = (up + down) + (left + right);
  s = s >= 2.0f * JAC_MODULUS ? s - 2.0f * JAC_MODULUS : s;
  s = s >= JAC_MODULUS ? s - JAC_MODULUS : s;
  return s;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Course kernels (the driver defines them). Both enqueue on `stream` and return at once.
 * jac_compute: rows first .. last of out (1 <= first, last <= g->rows) from in. Does nothing
 *   when last < first, so jac_compute(g, in, out, 2, g->rows - 1, s) is the interior on any
 *   slab, empty when the rank owns one or two rows.
 * jac_compute_edges: rows 1 and g->rows of out in one launch (row 1 only when rows == 1). */
void jac_compute(const jac_grid *g, const float *in, float *out, int first, int last,
                 cudaStream_t stream);
void jac_compute_edges(const jac_grid *g, const float *in, float *out, cudaStream_t stream);

/* Yours. Run iterations first_iter .. first_iter + iters - 1, in order, with the halo rows
 * exchanged by MPI_Irecv / MPI_Isend on the device rows themselves (the MPI is CUDA-aware: hand
 * it device pointers) over `comm`, and the interior computed while the halos are in flight.
 *
 * `comm` is the driver's duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN: wrap MPI calls in
 * MGPU_MPI(...). Rank numbers in it equal g->rank.
 * Kernels go on `stream` (a non-blocking stream). The driver queues work on it just before it
 * calls you (a copy that writes in's rows, behind a delay), and some ranks call you late.
 * Every MPI request you start must be complete when you return. When the driver has
 * synchronized `stream` after your return, rows 1 .. rows of slab[(first_iter + iters) % 2]
 * must hold the result of the last iteration. */
void jacobi_overlap(const jac_grid *g, long long first_iter, int iters, cudaStream_t stream,
                    MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* MODULE2_JACOBI_OVERLAP_H */
