#include "sum.h"

/* Right, then one store past the end of out. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  long i;
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
  out[n] = 0.0f;
}
