/*
 * Variant pow2-only: a single-stream ring with 16-byte (float4) additions and chunks rounded
 * up to multiples of 4 floats, but no scalar tail: the addition covers len/4*4 elements. With
 * the power-of-two sizes it was tested on, the tail is always empty; at any n that is not a
 * multiple of 4 the last chunk's last n % 4 elements are never added and keep the driver's NaN
 * poison on every rank. Must fail at correctness.
 */
#include <stdint.h>

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


__global__ void add4_kernel(float4 *out, const float4 *a, const float4 *b, size_t n4) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

/* The bug: only whole float4s are added. */
void add_vec(float *out, const float *a, const float *b, size_t n, cudaStream_t stream) {
  const size_t n4 = n / 4;
  if (n4 == 0) return;
  if ((((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) & 15) != 0) {
    add(out, a, b, n4 * 4, stream); /* misaligned buffers: same coverage, scalar loads */
    return;
  }
  size_t blocks = (n4 + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  add4_kernel<<<(unsigned)blocks, 256, 0, stream>>>((float4 *)out, (const float4 *)a,
                                                    (const float4 *)b, n4);
  MGPU_KERNEL();
}

} // namespace

void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream) {
  const size_t chunk = ((n + world - 1) / world + 3) / 4 * 4;
  const int next = mod(rank + 1, world), prev = mod(rank - 1, world);
  for (int step = 0; step < world - 1; step++) {
    const int c_out = mod(rank - step, world), c_in = mod(rank - step - 1, world);
    const size_t bo = c_out * chunk < n ? c_out * chunk : n, bi = c_in * chunk < n ? c_in * chunk : n;
    const size_t lo = (bo + chunk < n ? bo + chunk : n) - bo, li = (bi + chunk < n ? bi + chunk : n) - bi;
    const float *src = step == 0 ? send : recv;
    sendrecv(src + bo, lo, scratch, li, next, prev, comm, stream);
    add_vec(recv + bi, send + bi, scratch, li, stream);
  }
  for (int step = 0; step < world - 1; step++) {
    const int c_out = mod(rank + 1 - step, world), c_in = mod(rank - step, world);
    const size_t bo = c_out * chunk < n ? c_out * chunk : n, bi = c_in * chunk < n ? c_in * chunk : n;
    const size_t lo = (bo + chunk < n ? bo + chunk : n) - bo, li = (bi + chunk < n ? bi + chunk : n) - bi;
    sendrecv(recv + bo, lo, recv + bi, li, next, prev, comm, stream);
  }
}
