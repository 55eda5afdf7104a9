#include <stdio.h>

#include "sum.h"

/* Prints 50 MB on its first call, then does the right thing. */
void vec_sum(const float *a, const float *b, float *out, long n) {
  static int printed;
  long i;
  if (!printed) {
    printed = 1;
    for (i = 0; i < 500000; i++) printf("flood line %08ld ......................................................................................\n", i);
    fflush(stdout);
  }
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
}
