/* work.h — what the driver of module0/timing calls, and what it provides. */
#ifndef WORK_H
#define WORK_H

/* The learner's function: out[i] = 0.5*x*x + 3*x + 1 with x = in[i], for 0 <= i < n. */
void work(const float *in, float *out, long n);

/* The CPU stand-in for a second CUDA stream: fn(arg) runs later, when the driver waits for
 * "the device" (before it reads results), not when the function returns. */
void fx_defer(void (*fn)(void *), void *arg);

#endif
