// module0/alpha-beta: your code. The driver calls this function; see task.md.
#include "alpha_beta.h"

void fit_alpha_beta(sized_copy_op op, void *arg, size_t max_bytes, cudaStream_t stream,
                    double *alpha_us, double *beta_gbps) {
  (void)op;
  (void)arg;
  (void)max_bytes;
  (void)stream;
  // TODO 1: for bytes = 8, 16, 32, ..., max_bytes: warm up with 2 copies, then take 5 samples,
  //         each `iters` copies back to back between two CUDA events recorded on `stream`;
  //         the time for that size is the median of the 5 samples, in µs per copy.
  // TODO 2: fit t = alpha + n / beta to all the (n, t) pairs by ordinary least squares.
  // TODO 3: return alpha in microseconds and beta in GB/s (1e9 bytes per second).
  *alpha_us = 0;
  *beta_gbps = 0;
}
