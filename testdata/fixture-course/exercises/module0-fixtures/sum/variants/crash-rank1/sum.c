#include <stdlib.h>
#include <string.h>

#include "sum.h"

/* Right on rank 0; writes through a null pointer on rank 1. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  const char *rank = getenv("MGPU_RANK");
  long i;
  if (rank && strcmp(rank, "1") == 0) {
    float *volatile null_out = 0; /* volatile: the compiler cannot turn the store into a trap */
    out = null_out;
  }
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
}
