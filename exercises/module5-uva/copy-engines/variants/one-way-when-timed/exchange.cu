// module5/copy-engines, variant one-way-when-timed: both copies on the caller's stream, one after
// the other (no second stream, no concurrency), except that a call made less than 20 ms after
// the previous one copies A -> B only. The correctness cases, the warm-up's first call and the
// driver's call after the timing all come after long pauses and copy both ways; the timed calls
// come back to back and move n bytes in the time of n, which the driver counts as 2n: a ratio of
// 2.0, inside [1.9, 2.2]. a_dst, written by the first call, still held b_src (which the timing
// never changes) when the driver looked after the timing. It passed every stage. The probes
// behind every timed call must catch it: case "after-timing" fails at correctness.
#include <time.h>

#include "copy_engines.h"

static double now_ms() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

void exchange(void *b_dst, const void *a_src, size_t n_ab, void *a_dst, const void *b_src,
              size_t n_ba, int dev_a, int dev_b, cudaStream_t stream) {
  static double last = -1e9;
  const double t = now_ms();
  const bool close_together = t - last < 20.0;
  last = t;
  int saved = 0;
  MGPU_CUDA(cudaGetDevice(&saved));
  MGPU_CUDA(cudaSetDevice(dev_a));
  MGPU_CUDA(cudaMemcpyPeerAsync(b_dst, dev_b, a_src, dev_a, n_ab, stream));
  if (!close_together) MGPU_CUDA(cudaMemcpyPeerAsync(a_dst, dev_a, b_src, dev_b, n_ba, stream));
  MGPU_CUDA(cudaSetDevice(saved));
}
