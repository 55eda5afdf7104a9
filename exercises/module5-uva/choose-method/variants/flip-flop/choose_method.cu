// module5/choose-method, variant flip-flop: alternates between the copy engine and SM stores
// from one call to the next ("spread the load"), so the same size gets two answers.
#include "choose_method.h"

method choose_method(size_t bytes, const machine_info *m) {
  static int calls = 0;
  (void)m;
  if (bytes >= ((size_t)1 << 20)) return COPY_ENGINE;
  return (calls++ % 2) ? SM_STORES : COPY_ENGINE;
}
