#include "sum.h"

/* A typo: bb for b. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  long i;
  (void)b;
  for (i = 0; i < n; i++) {
    float x = a[i];
    out[i] = x + bb[i];
  }
}
