// module5/choose-method, variant always-sm: ignores the size; a kernel of stores on every SM.
#include "choose_method.h"

method choose_method(size_t bytes, const machine_info *m) {
  (void)bytes;
  (void)m;
  return SM_STORES;  // "kernels start faster than copies", true only for small copies
}
