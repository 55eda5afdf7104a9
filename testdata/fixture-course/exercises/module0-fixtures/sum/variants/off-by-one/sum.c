#include "sum.h"

/* Stops one element short. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  long i;
  for (i = 0; i < n - 1; i++) out[i] = a[i] + b[i];
}
