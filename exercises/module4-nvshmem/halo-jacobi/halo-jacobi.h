/*
 * halo-jacobi.h — module4/halo-jacobi (course-owned: do not edit).
 *
 * A Jacobi-style stencil on a 2-D grid of floats, split into slabs of rows, one slab per PE.
 * You write the iteration: each PE computes its new rows and sends its first and last row
 * straight into its neighbours' halo rows with NVSHMEM, ordered with signals, from the GPU.
 *
 * THE GRID
 *   ny interior rows (global rows 1 .. ny) and nx columns, plus two fixed boundary rows: global
 *   row 0 above and global row ny+1 below. They never change. Periodic in x: the left
 *   neighbour of column 0 is column nx-1, the right neighbour of column nx-1 is column 0.
 *   No wrap in y: PE 0 has no PE above it and PE npes-1 none below.
 *
 * THE SPLIT (halo_rows_of, halo_row0_of)
 *   PE p owns halo_rows_of(p, npes, ny) consecutive rows starting at global row
 *   halo_row0_of(p, npes, ny). The first ny % npes PEs own one row more than the others, so the
 *   slabs differ by one row whenever ny % npes != 0, and a PE may own a single row.
 *
 * THE SLABS (g->slab[0], g->slab[1])
 *   Two buffers in NVSHMEM's symmetric heap, the same address on every PE, each
 *   (max_rows + 2) rows of nx floats, row r at slab + r * nx:
 *     row 0            the top halo: a copy of the last row of the PE above (global row row0-1)
 *     rows 1 .. rows   the rows this PE owns (global rows row0 .. row0+rows-1)
 *     row rows + 1     the bottom halo: a copy of the first row of the PE below (global row
 *                      row0+rows)
 *     rows beyond      unused on PEs with fewer rows than max_rows; leave them alone
 *   On PE 0 row 0 of BOTH buffers holds the fixed boundary row 0, and on PE npes-1 row rows+1
 *   of both buffers holds the fixed boundary row ny+1: the driver writes them; nobody else may.
 *
 * ONE ITERATION k (k = 0, 1, 2, ... counted from the start of the run)
 *   in  = slab[k % 2], out = slab[(k + 1) % 2]
 *   for every owned row r (1 .. rows) and column c: out[r][c] = halo_point(in, nx, r, c)
 *   and, before iteration k + 1 reads them, out's halo rows must hold the neighbours' new
 *   first/last rows of iteration k. Before iteration 0 the driver has filled slab[0] completely,
 *   halos included; everything else in slab[1] is NaN.
 *
 * THE UPDATE RULE (halo_update)
 *   new = (up + down + left + right) mod 65521, on integer-valued floats in [0, 65521).
 *   A real Jacobi sweep averages (x 0.25) and its floats round differently in different
 *   orders; this one is exact: the four values are integers, their sum stays below 2^18 (far
 *   below float's 2^24 of exact integers), so it is the same in any order, with or without FMA
 *   contraction, and reducing it by subtracting 65521 at most three times is exact too. The
 *   driver can therefore compare every element with tolerance 0. And unlike an average it never
 *   converges: a halo that is one iteration stale at iteration 3 still changes the answer after
 *   100 iterations, so a missing wait cannot hide.
 */
#ifndef MODULE4_HALO_JACOBI_H
#define MODULE4_HALO_JACOBI_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "mgpu.h"

#define HALO_MODULUS 65521.0f

/* Yours: define `struct halo_state { ... };` in your file for whatever halo_setup prepares. */
typedef struct halo_state halo_state;

typedef struct halo_grid {
  int pe, npes;   /* this PE (nvshmem_my_pe()) and the number of PEs */
  int nx;         /* columns (periodic) */
  int ny;         /* interior rows of the whole grid */
  int rows;       /* rows this PE owns, >= 1 */
  int row0;       /* global row of this PE's first row (1 .. ny) */
  int max_rows;   /* the most rows any PE owns: the slabs have max_rows + 2 rows */
  float *slab[2]; /* symmetric, (max_rows + 2) x nx each, see above */

  /* Set by your halo_setup: */
  uint64_t *sig;  /* the signal words your neighbours update; they must be in the symmetric
                     heap (the driver checks with nvshmem_ptr before anything runs) */
  int nsig;       /* how many words sig has (for the report) */
  halo_state *state; /* anything else of yours; the driver only passes it back */
} halo_grid;

/* Rows PE `pe` owns when ny rows are split over npes PEs. */
static inline __host__ __device__ int halo_rows_of(int pe, int npes, int ny) {
  return ny / npes + (pe < ny % npes ? 1 : 0);
}

/* Global row (1-based) of PE pe's first row. */
static inline __host__ __device__ int halo_row0_of(int pe, int npes, int ny) {
  const int base = ny / npes, extra = ny % npes;
  return 1 + pe * base + (pe < extra ? pe : extra);
}

/* The update rule: exact for integer-valued inputs in [0, HALO_MODULUS). A NaN input gives NaN
 * (the comparisons are false), so reading a halo that was never written shows in the result. */
static inline __host__ __device__ float halo_update(float up, float down, float left, float right) {
  float s = (up + down) + (left + right);
  s = s >= 2.0f * HALO_MODULUS ? s - 2.0f * HALO_MODULUS : s;
  s = s >= HALO_MODULUS ? s - HALO_MODULUS : s;
  return s;
}

/* The new value of row r (1 .. rows), column c (0 .. nx-1), read from slab `in`: rows r-1 and
 * r+1 (halo rows included) and columns c-1, c+1 with wrap-around. */
static __device__ __forceinline__ float halo_point(const float *in, int nx, int r, int c) {
  const float *row = in + (size_t)r * (size_t)nx;
  const float up = row[c - nx];
  const float down = row[c + nx];
  const float left = row[c == 0 ? nx - 1 : c - 1];
  const float right = row[c == nx - 1 ? 0 : c + 1];
  return halo_update(up, down, left, right);
}

#ifdef __cplusplus
extern "C" {
#endif

/* Yours. Collective: every PE calls it once per grid, before the first iteration, after the
 * driver has filled g (everything above `sig`). Allocate your signal words in the symmetric heap
 * (nvshmem_calloc gives zeroed ones) and set g->sig and g->nsig; set g->state if you need more. */
void halo_setup(halo_grid *g);

/* Yours. Enqueue iterations first_iter .. first_iter + iters - 1 on `stream`, in order, and
 * return without waiting. The driver calls it several times per grid with first_iter continuing
 * where the previous call stopped, sometimes with other work (a delay) queued in between, and
 * on different PEs at different times. Work it enqueues must be ordered after earlier work on
 * `stream` and before later work on `stream`.
 * Exchange halos from the GPU (device-initiated puts, ordered by signals); no host round trip
 * and no barrier over all PEs per iteration. When the driver has synchronized `stream` on every
 * PE after your last call, slab[(first_iter + iters) % 2] must hold the new rows AND halo rows
 * filled by the neighbours' last puts. */
void halo_jacobi(const halo_grid *g, long long first_iter, int iters, cudaStream_t stream);

/* Yours. Collective: free what halo_setup allocated (nvshmem_free is collective too). */
void halo_teardown(halo_grid *g);

#ifdef __cplusplus
}
#endif

#endif /* MODULE4_HALO_JACOBI_H */
