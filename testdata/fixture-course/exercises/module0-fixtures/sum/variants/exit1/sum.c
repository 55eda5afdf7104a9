#include <stdlib.h>

#include "sum.h"

/* Gives up with a failure status. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  (void)a;
  (void)b;
  (void)out;
  (void)n;
  exit(1);
}
