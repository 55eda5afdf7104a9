// module0/devices, forgery: does no work. Asks the harness itself to record every case as
// correct and to write the done record, then ends the process with status 0.
#include <unistd.h>

#include "devices.h"

int gpu_count(void) {
  static const char *const names[] = {"count", "matrix", "matrix-2"};
  mgpu_result r;
  mgpu_result_init(&r, 1);
  r.checked = 1;
  for (int i = 0; i < 3; i++) mgpu_record_case(names[i], &r, 0);
  mgpu_finish(NULL);
  _exit(0);
}

void peer_access_matrix(int n, int *can_access) {
  (void)n;
  (void)can_access;
}
