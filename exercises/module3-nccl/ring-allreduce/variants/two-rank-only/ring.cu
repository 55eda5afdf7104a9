/*
 * Variant two-rank-only: written and tested on two GPUs. It swaps whole buffers with the
 * partner rank (rank ^ 1) and adds. On 2 GPUs that is a correct all-reduce (and not a slow
 * one: each rank moves n floats each way, as a 2-rank ring does), so there it passes. On 4
 * GPUs ranks 0+1 and 2+3 each sum only their pair. Expected to fail at correctness on the
 * 4-GPU acceptance machine; on 2 GPUs it passes.
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

} // namespace

void ring_allreduce(ncclComm_t comm, int rank, int world, const float *send, float *recv,
                    size_t n, float *scratch, cudaStream_t stream) {
  (void)world;
  const int partner = rank ^ 1;
  sendrecv(send, n, scratch, n, partner, partner, comm, stream);
  add(recv, send, scratch, n, stream);
}
