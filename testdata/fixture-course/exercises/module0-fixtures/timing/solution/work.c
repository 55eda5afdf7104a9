#include "work.h"

/* out[i] = 0.5*x*x + 3*x + 1 with x = in[i]. */
void work(const float *in, float *out, long n) {
  long i;
  for (i = 0; i < n; i++) {
    float x = in[i];
    out[i] = 0.5f * x * x + 3.0f * x + 1.0f;
  }
}
