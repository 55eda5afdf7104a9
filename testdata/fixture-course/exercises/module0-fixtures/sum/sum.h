/* sum.h — what the driver of module0/sum calls, and what it provides. */
#ifndef SUM_H
#define SUM_H

/* The learner's function: out[i] = a[i] + b[i] for 0 <= i < n. */
void vec_sum(const float *a, const float *b, float *out, long n);

/* A library routine that does the same. The exercise forbids calling it. */
void lib_sum(const float *a, const float *b, float *out, long n);

#endif
