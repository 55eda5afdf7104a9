#include "sum.h"

/* Right, but by the inline library routine, named through token pasting. */
#define LIBRARY(kind) lib_sum_##kind

void vec_sum(const float *a, const float *b, float *out, long n) {
  LIBRARY(fast)(a, b, out, n);
}
