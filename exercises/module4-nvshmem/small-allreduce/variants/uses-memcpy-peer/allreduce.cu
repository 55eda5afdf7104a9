/*
 * Variant uses-memcpy-peer: the blocks travel by copy engine. For every other PE the host
 * queues a cudaMemcpyPeerAsync of `in` into this PE's slot there (its address from
 * nvshmem_ptr) and raises the PE's signal from the stream; then it waits on the stream for the
 * others' signals and launches a kernel that adds. The exercise forbids cudaMemcpyPeerAsync:
 * the blocks must be put by your kernel. Must fail at the policy stage.
 */
#include "small-allreduce.h"

namespace {

struct Layout {
  size_t max_n;
  int npes;
};

__global__ void add_slots(const float *slots, const float *in, float *out, size_t n, int me,
                          int npes, size_t max_n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float sum = 0.0f;
    for (int q = 0; q < npes; q++) sum += q == me ? in[i] : slots[(size_t)q * max_n + i];
    out[i] = sum;
  }
}

} // namespace

void allreduce_setup(allreduce *ar, size_t max_n) {
  const int npes = nvshmem_n_pes();
  const size_t cap = max_n ? max_n : 1;
  ar->slots_bytes = 2 * (size_t)npes * cap * sizeof(float);
  ar->slots = (float *)nvshmem_malloc(ar->slots_bytes);
  ar->signals_count = (size_t)npes;
  ar->signals = (uint64_t *)nvshmem_calloc(npes, sizeof(uint64_t));
  ar->scratch = new Layout{cap, npes};
  ar->calls = 0;
  nvshmem_barrier_all();
}

void allreduce_small(allreduce *ar, const float *in, float *out, size_t n, cudaStream_t stream) {
  const Layout *lay = (const Layout *)ar->scratch;
  const int me = nvshmem_my_pe(), npes = lay->npes;
  if (n == 0) return;
  const unsigned long long epoch = ++ar->calls;
  float *set = ar->slots + (size_t)(epoch & 1) * npes * lay->max_n;
  int devices = 0, mine = 0;
  MGPU_CUDA(cudaGetDeviceCount(&devices));
  MGPU_CUDA(cudaGetDevice(&mine));
  for (int k = 1; k < npes; k++) {
    const int p = (me + k) % npes;
    void *there = nvshmem_ptr(set + (size_t)me * lay->max_n, p);
    MGPU_CUDA(cudaMemcpyPeerAsync(there, p % devices, in, mine, n * sizeof(float), stream));
    nvshmemx_signal_op_on_stream(&ar->signals[me], epoch, NVSHMEM_SIGNAL_SET, p, stream);
  }
  for (int p = 0; p < npes; p++)
    if (p != me)
      nvshmemx_signal_wait_until_on_stream(&ar->signals[p], NVSHMEM_CMP_GE, epoch, stream);
  unsigned blocks = (unsigned)((n + 255) / 256);
  if (blocks > 264) blocks = 264;
  add_slots<<<blocks, 256, 0, stream>>>(set, in, out, n, me, npes, lay->max_n);
  MGPU_KERNEL();
}

void allreduce_teardown(allreduce *ar) {
  nvshmem_free(ar->signals);
  nvshmem_free(ar->slots);
  delete (Layout *)ar->scratch;
}
