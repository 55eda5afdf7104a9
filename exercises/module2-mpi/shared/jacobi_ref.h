/*
 * jacobi_ref.h — module2's Jacobi exercises (course-owned: do not edit).
 *
 * The CPU reference the course's verifier computes your rows with: the same update rule as
 * jac_update, on the integers the grids hold (every value is an integer in [0, 65521), and a
 * sum of four stays below 2^18, so float and integer arithmetic give the same numbers; integers
 * are several times faster on a CPU). Nothing here talks to a GPU or another rank.
 */
#ifndef MODULE2_JACOBI_REF_H
#define MODULE2_JACOBI_REF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define JAC_REF_MODULUS 65521u

static inline uint32_t jac_ref_update(uint32_t up, uint32_t down, uint32_t left, uint32_t right) {
  uint32_t s = (up + down) + (left + right);
  s = s >= 2u * JAC_REF_MODULUS ? s - 2u * JAC_REF_MODULUS : s;
  s = s >= JAC_REF_MODULUS ? s - JAC_REF_MODULUS : s;
  return s;
}

/* One sweep over a window of global rows w0 .. w1 (row g at in + (g - w0) * nx) of a grid
 * with ny interior rows: every interior row strictly inside the window gets the update rule
 * (columns wrap around); the fixed boundary rows 0 and ny+1 and the window's own first and
 * last row are copied unchanged. A window edge that is not a boundary row goes stale that way,
 * and the error travels one row inwards per sweep: after k sweeps the rows at least k rows
 * from a stale edge are exact. */
static inline void jac_ref_sweep(const uint32_t *in, uint32_t *out, int w0, int w1, int ny,
                                 size_t nx) {
  int g;
  size_t c;
  for (g = w0; g <= w1; g++) {
    const uint32_t *r = in + (size_t)(g - w0) * nx;
    uint32_t *o = out + (size_t)(g - w0) * nx;
    if (g == 0 || g == ny + 1 || g == w0 || g == w1) {
      memcpy(o, r, nx * sizeof *r);
      continue;
    }
    if (nx == 1) {
      o[0] = jac_ref_update(r[-1], r[1], r[0], r[0]);
      continue;
    }
    {
      const uint32_t *up = r - nx, *down = r + nx;
      o[0] = jac_ref_update(up[0], down[0], r[nx - 1], r[1]);
      for (c = 1; c + 1 < nx; c++) o[c] = jac_ref_update(up[c], down[c], r[c - 1], r[c + 1]);
      o[nx - 1] = jac_ref_update(up[nx - 1], down[nx - 1], r[nx - 2], r[0]);
    }
  }
}

/* A flat grid (every column of a row equal) stays flat: left = right = the element itself. One
 * sweep over the ny + 2 row values v[0 .. ny+1]; the boundary rows stay. */
static inline void jac_ref_flat_sweep(const uint32_t *v, uint32_t *out, int ny) {
  int g;
  out[0] = v[0];
  out[ny + 1] = v[ny + 1];
  for (g = 1; g <= ny; g++) out[g] = jac_ref_update(v[g - 1], v[g + 1], v[g], v[g]);
}

#endif /* MODULE2_JACOBI_REF_H */
