// module5/choose-method, variant always-tma: ignores the size; TMA from 8 SMs for every copy.
#include "choose_method.h"

method choose_method(size_t bytes, const machine_info *m) {
  (void)bytes;
  (void)m;
  return TMA;  // "it uses the fewest SMs, so it must be the best"
}
