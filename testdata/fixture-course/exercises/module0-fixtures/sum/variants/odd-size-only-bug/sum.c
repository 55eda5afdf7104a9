#include "sum.h"

/* Two elements per step: the last element of an odd n is never written. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  long i;
  for (i = 0; i + 1 < n; i += 2) {
    out[i] = a[i] + b[i];
    out[i + 1] = a[i + 1] + b[i + 1];
  }
}
