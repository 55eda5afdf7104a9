// module5/copy-engines, variant sm-kernels: moves both directions with kernels of its own (16-byte
// loads and stores over NVLink, one kernel on each GPU, forked from and joined to `stream`)
// instead of the copy engines. The bytes arrive, ordered and concurrent, and two GPUs pushing at
// once come close to the target; but the exercise is the copy engines, which need no SM: the
// policy stage must refuse the kernel launch (cudaLaunchKernel, __cudaRegisterFunction).
#include <stdint.h>

#include "copy_engines.h"

enum { kMaxDevices = 64 };
static cudaStream_t side[kMaxDevices];
static cudaEvent_t fork_ev[kMaxDevices], join_ev[kMaxDevices];

static void prepare(int dev) {
  if (side[dev]) return;
  MGPU_CUDA(cudaSetDevice(dev));
  MGPU_CUDA(cudaStreamCreateWithFlags(&side[dev], cudaStreamNonBlocking));
  MGPU_CUDA(cudaEventCreateWithFlags(&fork_ev[dev], cudaEventDisableTiming));
  MGPU_CUDA(cudaEventCreateWithFlags(&join_ev[dev], cudaEventDisableTiming));
}

// Bytes one by one at the ends, 16-byte words in between (src and dst are cudaMalloc'd: the
// same alignment).
__global__ void push(char *dst, const char *src, size_t n) {
  const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t step = (size_t)gridDim.x * blockDim.x;
  size_t head = (16 - (uintptr_t)src % 16) % 16;
  if (head > n) head = n;
  const size_t words = (n - head) / 16, tail = n - head - 16 * words;
  const uint4 *s = reinterpret_cast<const uint4 *>(src + head);
  uint4 *d = reinterpret_cast<uint4 *>(dst + head);
  for (size_t i = tid; i < words; i += step) d[i] = s[i];
  if (tid < head) dst[tid] = src[tid];
  if (tid < tail) dst[head + 16 * words + tid] = src[head + 16 * words + tid];
}

static void launch(void *dst, const void *src, size_t n, cudaStream_t s) {
  size_t grid = (n / 16 + 1023) / 1024;
  if (grid > 264) grid = 264;
  if (grid < 1) grid = 1;
  push<<<(unsigned)grid, 1024, 0, s>>>((char *)dst, (const char *)src, n);
  MGPU_KERNEL();
}

void exchange(void *b_dst, const void *a_src, size_t n_ab, void *a_dst, const void *b_src,
              size_t n_ba, int dev_a, int dev_b, cudaStream_t stream) {
  int saved = 0;
  MGPU_CUDA(cudaGetDevice(&saved));
  prepare(dev_a);
  prepare(dev_b);
  MGPU_CUDA(cudaSetDevice(dev_a));
  MGPU_CUDA(cudaEventRecord(fork_ev[dev_a], stream));
  launch(b_dst, a_src, n_ab, stream);  // A pushes into B
  MGPU_CUDA(cudaSetDevice(dev_b));
  MGPU_CUDA(cudaStreamWaitEvent(side[dev_b], fork_ev[dev_a], 0));
  launch(a_dst, b_src, n_ba, side[dev_b]);  // B pushes into A, at the same time
  MGPU_CUDA(cudaEventRecord(join_ev[dev_b], side[dev_b]));
  MGPU_CUDA(cudaSetDevice(dev_a));
  MGPU_CUDA(cudaStreamWaitEvent(stream, join_ev[dev_b], 0));
  MGPU_CUDA(cudaSetDevice(saved));
}
