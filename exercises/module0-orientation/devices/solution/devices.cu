// module0/devices: reference solution.
#include "devices.h"

int gpu_count(void) {
  int n = 0;
  MGPU_CUDA(cudaGetDeviceCount(&n));
  return n;
}

void peer_access_matrix(int n, int *can_access) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      int ok = 1;  // a device always reaches its own memory
      if (i != j) MGPU_CUDA(cudaDeviceCanAccessPeer(&ok, i, j));
      can_access[i * n + j] = ok ? 1 : 0;
    }
  }
}
