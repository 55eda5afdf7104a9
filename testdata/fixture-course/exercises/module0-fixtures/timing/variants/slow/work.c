#include "work.h"

/* Right, in three passes where one would do. */
void work(const float *in, float *out, long n) {
  long i;
  int pass;
  for (pass = 0; pass < 3; pass++) {
    for (i = 0; i < n; i++) {
      float x = in[i];
      out[i] = 0.5f * x * x + 3.0f * x + 1.0f;
    }
    __asm__ __volatile__("" ::: "memory"); /* keep every pass */
  }
}
