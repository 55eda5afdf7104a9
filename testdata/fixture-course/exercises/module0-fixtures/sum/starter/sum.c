#include "sum.h"

/* out[i] = a[i] + b[i] for every i from 0 to n-1. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  /* TODO: write the loop. */
  (void)a;
  (void)b;
  (void)out;
  (void)n;
}
