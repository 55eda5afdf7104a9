/* sum.h — what the driver of module0/sum calls, and what it provides. */
#ifndef SUM_H
#define SUM_H

/* The learner's function: out[i] = a[i] + b[i] for 0 <= i < n. */
void vec_sum(const float *a, const float *b, float *out, long n);

/* A library routine that does the same. The exercise forbids calling it. */
void lib_sum(const float *a, const float *b, float *out, long n);

/* The same routine, inline: no symbol of it is left in an object that calls it. Also forbidden. */
static inline void lib_sum_fast(const float *a, const float *b, float *out, long n) {
  for (long i = 0; i < n; i++) out[i] = a[i] + b[i];
}

#endif
