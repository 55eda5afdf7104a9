/* A CPU test of jacobi_ref.h (run by exercises/jacobi_ref_test.go with the host C compiler; module2-mpi/shared/jacobi_ref.h): the
 * verifiers' window sweep, flat sweep and row owners against a whole grid swept with the float
 * rule every driver's kernels use. Prints "ok" and exits 0, or says what differs. */
#include <stdio.h>
#include <stdlib.h>

#include "jacobi_ref.h"

/* The harness functions jacobi_ref.h refers to; the test never reaches them. */
void mgpu_fail(const char *where, const char *call, const char *file, int line, long code,
               const char *msg) {
  fprintf(stderr, "mgpu_fail(%s, %s, %s:%d, %ld): %s\n", where, call, file, line, code, msg);
  exit(3);
}
int mgpu_hand_over(mgpu_ctx *ctx, const char *tag, void *buf, size_t bytes) {
  (void)ctx, (void)tag, (void)buf, (void)bytes;
  return 1;
}

/* jac_update of the exercises' headers, in float. */
static float rule(float up, float down, float left, float right) {
  float s = (up + down) + (left + right);
  s = s >= 2.0f * 65521.0f ? s - 2.0f * 65521.0f : s;
  s = s >= 65521.0f ? s - 65521.0f : s;
  return s;
}

static int rows_of(int r, int world, int ny) { return ny / world + (r < ny % world ? 1 : 0); }
static int row0_of(int r, int world, int ny) {
  const int base = ny / world, extra = ny % world;
  return 1 + r * base + (r < extra ? r : extra);
}

static uint64_t state = 88172645463325252ull;
static uint32_t next_value(void) {
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;
  return (uint32_t)(state % 65521u);
}

/* The whole grid (ny + 2 rows of nx) after `iters` sweeps, in float. */
static float *whole(const uint32_t *start, int ny, int nx, int iters) {
  const size_t n = (size_t)(ny + 2) * nx;
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *t;
  size_t i;
  int it, g, c;
  for (i = 0; i < n; i++) a[i] = (float)start[i];
  for (it = 0; it < iters; it++) {
    for (g = 0; g < ny + 2; g++)
      for (c = 0; c < nx; c++) {
        const float *r = a + (size_t)g * nx;
        b[(size_t)g * nx + c] = g == 0 || g == ny + 1
                                    ? r[c]
                                    : rule(r[c - nx], r[c + nx], r[c == 0 ? nx - 1 : c - 1],
                                           r[c == nx - 1 ? 0 : c + 1]);
      }
    t = a, a = b, b = t;
  }
  free(b);
  return a;
}

/* Rows row0 .. row0+rows-1 after `iters` sweeps of the window widened by `reach` rows each side,
 * as the verifiers do it (reach = iters), compared with the whole grid. Returns the mismatches. */
static long window_mismatches(const uint32_t *start, const float *want, int ny, int nx, int row0,
                              int rows, int iters, int reach) {
  const int w0 = row0 - reach < 0 ? 0 : row0 - reach;
  const int w1 = row0 + rows - 1 + reach > ny + 1 ? ny + 1 : row0 + rows - 1 + reach;
  const size_t nrow = (size_t)(w1 - w0 + 1);
  uint32_t *a = malloc(nrow * nx * sizeof *a), *b = malloc(nrow * nx * sizeof *b), *t;
  long bad = 0;
  size_t i;
  int it;
  for (i = 0; i < nrow * nx; i++) a[i] = start[(size_t)w0 * nx + i];
  for (it = 0; it < iters; it++) {
    jac_ref_sweep(a, b, w0, w1, ny, (size_t)nx);
    t = a, a = b, b = t;
  }
  for (i = 0; i < (size_t)rows * nx; i++)
    bad += (float)a[(size_t)(row0 - w0) * nx + i] != want[(size_t)row0 * nx + i];
  free(b);
  free(a);
  return bad;
}

int main(void) {
  static const int nxs[] = {1, 2, 5, 53};
  static const int iterss[] = {0, 1, 3, 10, 40};
  long bad = 0, narrow_caught = 0, narrow_tries = 0;
  int ny, world, r, k, j, g;

  /* Owners: every interior row to the rank whose slab holds it, the boundaries to the ends. */
  for (ny = 1; ny <= 40; ny++)
    for (world = 1; world <= ny && world <= 9; world++) {
      if (jac_owner_of_row(ny, world, 0) != 0 || jac_owner_of_row(ny, world, ny + 1) != world - 1) {
        printf("boundary owners wrong: ny %d world %d\n", ny, world);
        return 1;
      }
      for (g = 1; g <= ny; g++) {
        const int o = jac_owner_of_row(ny, world, g);
        if (o < 0 || o >= world || g < row0_of(o, world, ny) || g >= row0_of(o, world, ny) + rows_of(o, world, ny)) {
          printf("jac_owner_of_row(%d, %d, %d) = %d, not the rank holding that row\n", ny, world, g, o);
          return 1;
        }
      }
    }

  for (k = 0; k < 4; k++) {
    const int nx = nxs[k];
    ny = 37;
    {
      const size_t n = (size_t)(ny + 2) * nx;
      uint32_t *start = malloc(n * sizeof *start), *flat = malloc((size_t)(ny + 2) * sizeof *flat);
      size_t i;
      for (i = 0; i < n; i++) start[i] = i % 97 == 0 ? 65520u : next_value();
      for (j = 0; j < 5; j++) {
        const int iters = iterss[j];
        float *want = whole(start, ny, nx, iters);
        for (world = 1; world <= 8; world++)
          for (r = 0; r < world; r++) {
            const int row0 = row0_of(r, world, ny), rows = rows_of(r, world, ny);
            bad += window_mismatches(start, want, ny, nx, row0, rows, iters, iters);
            /* A window one row too narrow must show (where a window edge is not a boundary):
             * the test can tell a wrong reference from a right one. */
            if (iters >= 2 && row0 - iters > 0) {
              narrow_tries++;
              narrow_caught += window_mismatches(start, want, ny, nx, row0, rows, iters, iters - 2) > 0;
            }
          }
        free(want);
      }
      /* Flat: one value per row, swept with jac_flat_values, against the whole grid. */
      for (g = 0; g < ny + 2; g++) flat[g] = start[(size_t)g * nx];
      {
        uint32_t *grid = malloc(n * sizeof *grid);
        float *want, *v;
        int c;
        for (g = 0; g < ny + 2; g++)
          for (c = 0; c < nx; c++) grid[(size_t)g * nx + c] = flat[g];
        want = whole(grid, ny, nx, 25);
        v = jac_flat_values(flat, ny, 25); /* frees flat */
        for (g = 0; g < ny + 2; g++)
          for (c = 0; c < nx; c++) bad += v[g] != want[(size_t)g * nx + c];
        free(v);
        free(want);
        free(grid);
      }
      free(start);
    }
  }
  if (bad) {
    printf("%ld elements differ from the whole grid\n", bad);
    return 1;
  }
  if (narrow_tries == 0 || narrow_caught < narrow_tries / 2) {
    printf("a too narrow window went unnoticed (%ld of %ld caught)\n", narrow_caught, narrow_tries);
    return 1;
  }
  printf("ok\n");
  return 0;
}
