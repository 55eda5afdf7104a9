/*
 * jacobi-sendrecv.h — module2/jacobi-sendrecv (course-owned: do not edit).
 *
 * A Jacobi-style stencil on a 2-D grid of floats, split into slabs of rows, one slab per rank
 * (one rank per GPU, started by mpirun). You write the iteration loop: before each sweep,
 * exchange the edge rows with the neighbouring ranks by MPI_Sendrecv on the device buffers,
 * then run the course's stencil kernel.
 *
 * THE GRID
 *   ny interior rows (global rows 1 .. ny) and nx columns, plus two fixed boundary rows: global
 *   row 0 above and global row ny+1 below. They never change. Periodic in x (the stencil
 *   handles that). No wrap in y: rank 0 has no rank above it, rank world-1 none below.
 *
 * THE SPLIT (jac_rows_of, jac_row0_of)
 *   Rank r owns jac_rows_of(r, world, ny) consecutive rows starting at global row
 *   jac_row0_of(r, world, ny). The first ny % world ranks own one row more, so slabs differ by
 *   one row whenever ny % world != 0, and a rank may own a single row.
 *
 * THE SLABS (g->slab[0], g->slab[1])
 *   Two device buffers on this rank's GPU, each (max_rows + 2) rows of nx floats, row r at
 *   slab + r * nx:
 *     row 0            the top halo: a copy of the last row of the rank above
 *     rows 1 .. rows   the rows this rank owns (global rows row0 .. row0+rows-1)
 *     row rows + 1     the bottom halo: a copy of the first row of the rank below
 *     rows beyond      unused on ranks with fewer rows than max_rows; leave them alone
 *   On rank 0, row 0 of BOTH slabs holds the fixed boundary row 0; on rank world-1, row rows+1
 *   of both holds the fixed boundary row ny+1. The driver writes them; nobody else may.
 *
 * ONE ITERATION k (k = 0, 1, 2, ... counted from the start of the run)
 *   in = slab[k % 2], out = slab[(k + 1) % 2]
 *   1. the halo rows of `in` get the neighbours' current edge rows: this rank's row 1 goes to
 *      the bottom halo of the rank above, its row `rows` to the top halo of the rank below,
 *      and the neighbours' rows come into this rank's rows 0 and rows+1;
 *   2. jac_stencil(in, out, nx, rows, stream) computes rows 1 .. rows of out.
 *   The halo rows of `in` hold nothing useful until step 1 has run: before iteration 0 they are
 *   NaN (only the fixed boundary rows are filled).
 *
 * THE UPDATE RULE (jac_update)
 *   new = (up + down + left + right) mod 65521, on integer-valued floats in [0, 65521). The sum
 *   stays below 2^18, far below float's 2^24 exact integers, so it is exact in any order and
 *   the driver compares every element with tolerance 0. Unlike an average it never converges:
 *   a halo that is one iteration stale changes the answer for good.
 */
#ifndef MODULE2_JACOBI_SENDRECV_H
#define MODULE2_JACOBI_SENDRECV_H

#include <stddef.h>

#include <mpi.h>
#include <cuda_runtime.h>

#include "mgpu.h"

#define JAC_MODULUS 65521.0f

typedef struct jac_grid {
  MPI_Comm comm;  /* the driver's duplicate of MPI_COMM_WORLD (errors are returned: MGPU_MPI) */
  int rank, world; /* this rank and the number of ranks in comm */
  int nx;          /* columns (periodic) */
  int ny;          /* interior rows of the whole grid */
  int rows;        /* rows this rank owns, >= 1 */
  int row0;        /* global row of this rank's first row (1 .. ny) */
  int max_rows;    /* the most rows any rank owns: the slabs have max_rows + 2 rows */
  float *slab[2];  /* device, (max_rows + 2) x nx each, see above */
} jac_grid;

/* Rows rank r owns when ny rows are split over world ranks. */
static inline __host__ __device__ int jac_rows_of(int r, int world, int ny) {
  return ny / world + (r < ny % world ? 1 : 0);
}

/* Global row (1-based) of rank r's first row. */
static inline __host__ __device__ int jac_row0_of(int r, int world, int ny) {
  const int base = ny / world, extra = ny % world;
  return 1 + r * base + (r < extra ? r : extra);
}

/* The update rule: exact for integer-valued inputs in [0, JAC_MODULUS). A NaN input gives NaN,
 * so a halo row that was never received shows in the result. */
static inline __host__ __device__ float jac_update(float up, float down, float left, float right) {
  float s = (up + down) + (left + right);
  s = s >= 2.0f * JAC_MODULUS ? s - 2.0f * JAC_MODULUS : s;
  s = s >= JAC_MODULUS ? s - JAC_MODULUS : s;
  return s;
}

/* One sweep over rows first .. first+nrows-1 of `in` into `out`, reading the rows above and
 * below them, columns wrapping around. */
static __global__ void jac_stencil_kernel(const float *__restrict__ in, float *__restrict__ out,
                                          int nx, int first, int nrows) {
  const long long n = (long long)nrows * nx;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const int r = first + (int)(i / nx), c = (int)(i % nx);
    const float *row = in + (size_t)r * (size_t)nx;
    out[(size_t)r * (size_t)nx + c] = jac_update(row[c - nx], row[c + nx],
                                                 row[c == 0 ? nx - 1 : c - 1],
                                                 row[c == nx - 1 ? 0 : c + 1]);
  }
}

/* The course's stencil: rows 1 .. rows of out from in (halo rows 0 and rows+1 of in are read),
 * queued on `stream`; returns without waiting. */
static inline void jac_stencil(const float *in, float *out, int nx, int rows, cudaStream_t stream) {
  const long long n = (long long)rows * nx;
  long long blocks = (n + 255) / 256;
  if (rows < 1) return;
  if (blocks > 8192) blocks = 8192;
  jac_stencil_kernel<<<(unsigned)blocks, 256, 0, stream>>>(in, out, nx, 1, rows);
  MGPU_KERNEL();
}

#ifdef __cplusplus
extern "C" {
#endif

/* Yours. Run iterations first_iter .. first_iter + iters - 1, in order, each as described
 * above: exchange the halo rows of in = slab[k % 2] with MPI_Sendrecv on the device rows, then
 * jac_stencil(in, out, ...) on `stream`.
 *
 * MPI does not wait for `stream`: when you call it, the rows it reads must already hold what
 * the work queued on `stream` computes. The driver calls you several times per grid, with
 * first_iter continuing where the previous call stopped, and queues other work (a delay) on
 * `stream` between some calls, on some ranks.
 * When the driver has synchronized `stream` after your last call, rows 1 .. rows of
 * slab[(first_iter + iters) % 2] must hold the result. */
void jacobi_run(const jac_grid *g, long long first_iter, int iters, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE2_JACOBI_SENDRECV_H */
