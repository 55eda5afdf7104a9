/*
 * Variant host-barrier: the host drives every call. It queues a put of `in` to every other PE
 * on the stream (nvshmemx_putmem_signal_on_stream: a put with its signal, as the exercise asks,
 * though nobody waits for the signal here), waits for the stream, meets the other PEs in the
 * host's nvshmem_barrier_all (which also completes everybody's puts), and then launches a kernel
 * that adds the slots. Right sums (two sets of slots, as in the reference), but every call pays
 * a stream synchronization, a barrier between processes and two launches: slower than
 * ncclAllReduce at 64 KiB, let alone twice as fast. In the timed loop the host blocks inside the
 * call, so the harness times it ungated after its gate times out, and says so. Must fail at the
 * performance stage.
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
  ar->signals_count = 1; // set by the puts, never waited for: the barrier does the synchronizing
  ar->signals = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
  ar->scratch = new Layout{cap, npes};
  ar->calls = 0;
  nvshmem_barrier_all();
}

void allreduce_small(allreduce *ar, const float *in, float *out, size_t n, cudaStream_t stream) {
  const Layout *lay = (const Layout *)ar->scratch;
  const int me = nvshmem_my_pe(), npes = lay->npes;
  if (n == 0) return;
  ar->calls++;
  float *set = ar->slots + (size_t)(ar->calls & 1) * npes * lay->max_n;
  for (int k = 1; k < npes; k++) {
    const int p = (me + k) % npes;
    nvshmemx_putmem_signal_on_stream(set + (size_t)me * lay->max_n, in, n * sizeof(float),
                                     ar->signals, ar->calls, NVSHMEM_SIGNAL_SET, p, stream);
  }
  MGPU_CUDA(cudaStreamSynchronize(stream));
  nvshmem_barrier_all(); // every PE's puts have landed everywhere
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
