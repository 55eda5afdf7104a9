// module5/peer-stores, variant part-when-timed: the reference kernel, except that a call made
// less than 15 ms after the previous call on the same stream copies the first 7/8 of the
// 16-byte words only (the head and tail bytes still right). The correctness cases call each
// GPU's stream once per case, more than 20 ms apart (the driver's delay kernel lies between),
// and the first call of the timing follows a pause too: those copy every byte. The timed calls
// come back to back, and moving 7/8 of the bytes in the time of 7/8 turns 0.93 of the copy
// engine into 1.06, inside [0.9, 1.1]. Whether the late call of "after-timing" copies
// everything depends on how long the driver takes to refill src, so that check alone cannot be
// counted on. The probe behind every timed call finds bytes it overwrote before the call still
// overwritten: the run must fail at correctness, case after-timing, saying that a timed call
// left bytes of dst unwritten.
#include <stdint.h>
#include <time.h>

#include "peer_stores.h"

// 16-byte words [0, words_done) in a grid-stride loop (words_done = words: the whole body),
// and the up to 15 bytes before the first 16-byte boundary (head) and after the last one
// (tail) byte by byte.
__global__ void copy_kernel(char *dst, const char *src, size_t head, size_t words, size_t words_done,
                            size_t tail) {
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const uint4 *s = reinterpret_cast<const uint4 *>(src + head);
  uint4 *d = reinterpret_cast<uint4 *>(dst + head);
  for (size_t i = tid; i < words_done; i += stride) d[i] = s[i];
  if (tid < head) dst[tid] = src[tid];
  if (tid < tail) dst[head + 16 * words + tid] = src[head + 16 * words + tid];
}

static double now_ms() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// Was the previous call on `stream` less than 15 ms ago? (One stream per GPU: the correctness
// cases call every GPU once, back to back, and must not count as close.)
static bool close_together(cudaStream_t stream) {
  enum { kSlots = 64 };
  static cudaStream_t streams[kSlots];
  static double last[kSlots];
  const double t = now_ms();
  for (int k = 0; k < kSlots; k++) {
    if (streams[k] == stream) {
      const bool close = t - last[k] < 15.0;
      last[k] = t;
      return close;
    }
    if (!streams[k]) {
      streams[k] = stream;
      last[k] = t;
      return false;
    }
  }
  return false;
}

void sm_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  static int blocks = 0;
  if (blocks == 0) {
    int dev = 0, sms = 0;
    MGPU_CUDA(cudaGetDevice(&dev));
    MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    blocks = 2 * sms;  // two blocks of 1024 threads per SM: plenty of stores in flight
  }
  size_t head = (16 - (uintptr_t)src % 16) % 16;
  if (head > bytes) head = bytes;
  const size_t words = (bytes - head) / 16;
  const size_t tail = bytes - head - 16 * words;
  const size_t words_done = close_together(stream) ? words - words / 8 : words;
  size_t grid = (words + 1023) / 1024;
  if (grid > (size_t)blocks) grid = blocks;
  if (grid < 1) grid = 1;
  copy_kernel<<<(unsigned)grid, 1024, 0, stream>>>((char *)dst, (const char *)src, head, words, words_done, tail);
  MGPU_KERNEL();
}
