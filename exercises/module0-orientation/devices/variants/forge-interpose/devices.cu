// module0/devices, forgery: replaces the C library's fwrite, which the harness uses for its
// records when it writes a file, with one that writes nothing; answers 0 devices and an empty
// matrix.
#include <stdio.h>

#include "devices.h"

extern "C" size_t fwrite(const void *p, size_t size, size_t n, FILE *f) {
  (void)p;
  (void)size;
  (void)f;
  return n;
}

int gpu_count(void) { return 0; }

void peer_access_matrix(int n, int *can_access) {
  (void)n;
  (void)can_access;
}
