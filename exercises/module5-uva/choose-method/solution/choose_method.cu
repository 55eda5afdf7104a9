// module5/choose-method: reference solution.
//
// A cost model instead of a table: each method's time is taken to be a fixed cost plus the
// bytes over a bandwidth, t(n) = a + n / b, the shape NCCL's tuner uses to pick an algorithm
// and a protocol for every call. The driver's two probes give two points of each line: the
// 2 KiB probe is nearly all fixed cost, the 512 MiB probe nearly all bandwidth. The line
// through them is the model; the answer is the method whose line is lowest at `bytes`.
// Near a crossover two lines are close, so a wrong pick there costs little; far from one the
// gap is larger than the model's error.
#include "choose_method.h"

// The model's time for method k at `bytes`, in µs: the straight line through the two probes.
static double model_us(const machine_info *m, int k, size_t bytes) {
  const double x0 = (double)m->small.bytes, x1 = (double)m->large.bytes;
  const double y0 = m->small.us[k], y1 = m->large.us[k];
  const double per_byte = (y1 - y0) / (x1 - x0);  // 1 / bandwidth
  const double fixed = y0 - per_byte * x0;        // the fixed cost a
  return fixed + per_byte * (double)bytes;
}

method choose_method(size_t bytes, const machine_info *m) {
  const method all[] = {COPY_ENGINE, SM_STORES, TMA};
  method best = COPY_ENGINE;
  double best_us = model_us(m, COPY_ENGINE, bytes);
  for (method k : all) {
    const double t = model_us(m, k, bytes);
    if (t < best_us) {
      best = k;
      best_us = t;
    }
  }
  return best;
}
