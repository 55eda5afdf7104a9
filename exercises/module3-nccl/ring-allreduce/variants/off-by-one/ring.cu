/*
 * Variant off-by-one: a plain single-stream ring whose chunks are n/world elements each,
 * rounded down. The last n % world elements belong to no chunk: nobody reduces or gathers
 * them and they keep the driver's NaN poison. Right whenever world divides n; every case here
 * has an n that 2 and 4 do not divide. Must fail at correctness.
 */
#include "ring-allreduce.h"

namespace {

__global__ void add_kernel(float *__restrict__ out, const float *__restrict__ a,
                           const float *__restrict__ b, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = a[i] + b[i];
}

void add(float *out, const float *a, const float *b, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  size_t blocks = (n + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  add_kernel<<<(unsigned)blocks, 256, 0, stream>>>(out, a, b, n);
  MGPU_KERNEL();
}

void sendrecv(const float *out, size_t out_len, float *in, size_t in_len, int next, int prev,
              ncclComm_t comm, cudaStream_t stream) {
  if (out_len == 0 && in_len == 0) return;
  MGPU_NCCL(ncclGroupStart());
  if (out_len) MGPU_NCCL(ncclSend(out, out_len, ncclFloat, next, comm, stream));
  if (in_len) MGPU_NCCL(ncclRecv(in, in_len, ncclFloat, prev, comm, stream));
  MGPU_NCCL(ncclGroupEnd());
}

int mod(int a, int m) { return ((a % m) + m) % m; }

} // namespace

void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream) {
  const size_t chunk = n / (size_t)world; /* the bug: the remainder is dropped */
  const int next = mod(rank + 1, world), prev = mod(rank - 1, world);
  for (int step = 0; step < world - 1; step++) {
    const int c_out = mod(rank - step, world), c_in = mod(rank - step - 1, world);
    const float *src = step == 0 ? send : recv;
    sendrecv(src + c_out * chunk, chunk, scratch, chunk, next, prev, comm, stream);
    add(recv + c_in * chunk, send + c_in * chunk, scratch, chunk, stream);
  }
  for (int step = 0; step < world - 1; step++) {
    const int c_out = mod(rank + 1 - step, world), c_in = mod(rank - step, world);
    sendrecv(recv + c_out * chunk, chunk, recv + c_in * chunk, chunk, next, prev, comm, stream);
  }
}
