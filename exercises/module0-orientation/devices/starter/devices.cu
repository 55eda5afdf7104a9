// module0/devices: your code. The driver calls these two functions; see task.md.
#include "devices.h"

int gpu_count(void) {
  // TODO: ask the CUDA runtime how many devices this process sees (cudaGetDeviceCount).
  //       Check the call: MGPU_CUDA(cudaGetDeviceCount(&n));
  return 0;
}

void peer_access_matrix(int n, int *can_access) {
  // TODO: for every pair (i, j) of devices 0..n-1, set can_access[i * n + j] to 1 when
  //       device i can access device j's memory (cudaDeviceCanAccessPeer), else 0.
  //       The diagonal (i == j) is 1: a device always reaches its own memory.
  (void)n;
  (void)can_access;
}
