/*
 * jacobi_ref.h — module2's Jacobi exercises (course-owned: do not edit).
 *
 * The CPU reference the course's verifier computes your rows with: the same update rule as
 * jac_update, on the integers the grids hold (every value is an integer in [0, 65521), and a
 * sum of four stays below 2^18, so float and integer arithmetic give the same numbers; integers
 * are several times faster on a CPU), and what the ranks hand the verifier after the timing.
 * Nothing here talks to a GPU or another rank.
 */
#ifndef MODULE2_JACOBI_REF_H
#define MODULE2_JACOBI_REF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgpu.h"

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

/* The rank whose key makes global row g of a grid of ny interior rows over `world` ranks (the
 * split of jac_rows_of / jac_row0_of): the owner of an interior row; rank 0 the boundary row 0;
 * the last rank the boundary row ny+1. */
static inline int jac_owner_of_row(int ny, int world, int g) {
  const int base = ny / world, extra = ny % world;
  if (g <= 0) return 0;
  if (g > ny) return world - 1;
  if (g - 1 < extra * (base + 1)) return (g - 1) / (base + 1);
  return extra + (g - 1 - extra * (base + 1)) / base;
}

/* The row values of a flat grid after `iters` sweeps: v holds the ny + 2 starting values and is
 * freed; returns the values as floats (the caller frees). */
static inline float *jac_flat_values(uint32_t *v, int ny, long long iters) {
  const size_t n = (size_t)ny + 2;
  uint32_t *b = (uint32_t *)malloc(n * sizeof *b);
  float *out = (float *)malloc(n * sizeof *out);
  long long it;
  size_t g;
  if (!b || !out) mgpu_fail("driver", "malloc", __FILE__, __LINE__, (long)n, "out of host memory");
  for (it = 0; it < iters; it++) {
    uint32_t *t;
    jac_ref_flat_sweep(v, b, ny);
    t = v;
    v = b;
    b = t;
  }
  for (g = 0; g < n; g++) out[g] = (float)v[g];
  free(b);
  free(v);
  return out;
}

/* What a rank hands over after the timing: its rows of the timed grids as they are (yours, the
 * baseline's), then of the round with fresh rows in the same buffers (yours, the baseline's),
 * and the counts: iterations of yours and of the baseline in the timed grids, guard hits. */
typedef struct jac_after {
  float *timed_yours, *timed_base, *fresh_yours, *fresh_base;
  long long facts[3];
} jac_after;

static inline void jac_after_alloc(jac_after *h, size_t bytes) {
  memset(h, 0, sizeof *h);
  h->timed_yours = (float *)malloc(bytes);
  h->timed_base = (float *)malloc(bytes);
  h->fresh_yours = (float *)malloc(bytes);
  h->fresh_base = (float *)malloc(bytes);
  if (!h->timed_yours || !h->timed_base || !h->fresh_yours || !h->fresh_base)
    mgpu_fail("driver", "malloc", __FILE__, __LINE__, (long)(bytes >> 20), "out of host memory (MiB)");
}

static inline void jac_after_free(jac_after *h) {
  free(h->fresh_base);
  free(h->fresh_yours);
  free(h->timed_base);
  free(h->timed_yours);
}

/* Both sides: hands the four row sets (bytes each) and the counts over under "<name>/...".
 * Returns 1 where the checks are made, after requiring the counts to be at least what the
 * driver's warm-up alone runs (min_yours, min_base) and sane. */
static inline int jac_after_hand_over(mgpu_ctx *ctx, const char *name, jac_after *h, size_t bytes,
                                      long long min_yours, long long min_base) {
  static const char *const what[4] = {"timed-yours", "timed-baseline", "fresh-yours",
                                      "fresh-baseline"};
  float *const bufs[4] = {h->timed_yours, h->timed_base, h->fresh_yours, h->fresh_base};
  char tag[160];
  int k;
  for (k = 0; k < 4; k++) {
    snprintf(tag, sizeof tag, "%s/%s", name, what[k]);
    mgpu_hand_over(ctx, tag, bufs[k], bytes);
  }
  snprintf(tag, sizeof tag, "%s/facts", name);
  if (!mgpu_hand_over(ctx, tag, h->facts, sizeof h->facts)) return 0;
  if (h->facts[0] < min_yours || h->facts[1] < min_base || h->facts[0] > 100000000 ||
      h->facts[1] > 100000000)
    mgpu_fail("verifier", "iteration counts", __FILE__, __LINE__, (long)h->facts[0],
              "the rank's timed iteration counts are out of range");
  return 1;
}

#endif /* MODULE2_JACOBI_REF_H */
