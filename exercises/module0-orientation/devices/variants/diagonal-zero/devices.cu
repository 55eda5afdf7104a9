// module0/devices variant: asks about every pair of different devices correctly, but leaves
// the diagonal at 0 ("a device is not its own peer"). The matrix says whether i can reach j's
// memory, and a device always reaches its own.
#include "devices.h"

int gpu_count(void) {
  int n = 0;
  MGPU_CUDA(cudaGetDeviceCount(&n));
  return n;
}

void peer_access_matrix(int n, int *can_access) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      int ok = 0;
      if (i != j) MGPU_CUDA(cudaDeviceCanAccessPeer(&ok, i, j));
      can_access[i * n + j] = ok ? 1 : 0;
    }
  }
}
