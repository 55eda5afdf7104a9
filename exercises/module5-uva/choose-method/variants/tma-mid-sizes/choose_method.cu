// module5/choose-method, variant tma-mid-sizes: the reference model everywhere, except that
// copies from 16 MiB up to (not including) 1 GiB go to the TMA "to leave the SMs to compute".
// Right at the ends, wrong in the middle: the check must find the loss at a size that is not
// the largest.
#include "choose_method.h"

static double model_us(const machine_info *m, int k, size_t bytes) {
  const double x0 = (double)m->small.bytes, x1 = (double)m->large.bytes;
  const double y0 = m->small.us[k], y1 = m->large.us[k];
  const double per_byte = (y1 - y0) / (x1 - x0);
  return y0 - per_byte * x0 + per_byte * (double)bytes;
}

method choose_method(size_t bytes, const machine_info *m) {
  if (bytes >= ((size_t)16 << 20) && bytes < ((size_t)1 << 30)) return TMA;
  const method all[] = {COPY_ENGINE, SM_STORES, TMA};
  method best = COPY_ENGINE;
  for (method k : all)
    if (model_us(m, k, bytes) < model_us(m, best, bytes)) best = k;
  return best;
}
