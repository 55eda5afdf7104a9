#include "sum.h"

/* out[i] = a[i] + b[i] for every i from 0 to n-1. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  long i;
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
}
