#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sum.h"

/* Right on rank 1; never returns on rank 0. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  const char *rank = getenv("MGPU_RANK");
  long i;
  if (rank && strcmp(rank, "0") == 0)
    for (;;) sleep(1);
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
}
