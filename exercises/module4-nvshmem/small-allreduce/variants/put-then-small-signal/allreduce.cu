/*
 * allreduce.cu — variant put-then-small-signal of module4/small-allreduce (a planted mistake).
 *
 * Each chunk goes out with a typed put that has no signal (nvshmemx_float_put_block), and the
 * signal follows in a put-with-signal of 8 bytes (the chunk's first two floats once more). The
 * put-with-signal orders its own 8 bytes before its signal, not the earlier put's chunk: without
 * an nvshmem_fence between the two, the signal can land first and the peer adds a chunk that is
 * still arriving. Refused at policy: the exercise forbids every put without a signal.
 */
#include "small-allreduce.h"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxChunks = 32;       // blocks per call, and signal words per source PE
constexpr size_t kMinChunk = 1024;   // floats: below this a chunk is not worth a block
constexpr size_t kAlign = 4;         // chunk boundaries on 16 bytes

struct Layout {
  size_t max_n;   // floats per slot
  int npes;
};

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Slot of PE `src` in parity set `par`.
__device__ __forceinline__ float *slot(float *slots, int par, int src, int npes, size_t max_n) {
  return slots + ((size_t)par * npes + src) * max_n;
}

__global__ void allreduce_kernel(float *slots, uint64_t *signals, const float *in, float *out,
                                 size_t n, size_t chunk, size_t max_n, unsigned long long epoch) {
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  const int c = blockIdx.x, par = (int)(epoch & 1);
  const size_t begin = (size_t)c * chunk;
  const size_t end = begin + chunk < n ? begin + chunk : n;
  const size_t bytes = (end - begin) * sizeof(float);

  // 1. Push: to the next PE first, so that the PEs do not all hit PE 0 at once.
  for (int k = 1; k < npes; k++) {
    const int p = (me + k) % npes;
    float *dst = slot(slots, par, me, npes, max_n) + begin;
    nvshmemx_float_put_block(dst, in + begin, end - begin, p);
    // MISTAKE: a small put-with-signal as "the chunk is in", with no nvshmem_fence before it.
    nvshmemx_putmem_signal_block(dst, in + begin, bytes < 8 ? bytes : 8,
                                 &signals[me * kMaxChunks + c], epoch, NVSHMEM_SIGNAL_SET, p);
  }

  // 2. Wait for chunk c from everybody else, one thread per source.
  const int p = threadIdx.x;
  if (p < npes && p != me) {
    nvshmem_signal_wait_until(&signals[p * kMaxChunks + c], NVSHMEM_CMP_GE, epoch);
    __threadfence(); // this thread's later loads come after the signal it saw
  }
  __syncthreads();

  // 3. Add, in PE order (any order is exact for the driver's integer-valued data). The slots
  //    were written by other GPUs: __ldcv reads them from memory, never from a stale L1 line.
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float sum = 0.0f;
    for (int q = 0; q < npes; q++)
      sum += q == me ? in[i] : __ldcv(slot(slots, par, q, npes, max_n) + i);
    out[i] = sum;
  }
}

} // namespace

void allreduce_setup(allreduce *ar, size_t max_n) {
  const int npes = nvshmem_n_pes();
  const size_t cap = max_n ? max_n : 1;
  ar->slots_bytes = 2 * (size_t)npes * cap * sizeof(float);
  ar->slots = (float *)nvshmem_malloc(ar->slots_bytes);
  ar->signals_count = (size_t)npes * kMaxChunks;
  ar->signals = (uint64_t *)nvshmem_calloc(ar->signals_count, sizeof(uint64_t));
  ar->scratch = new Layout{cap, npes};
  ar->calls = 0;
  nvshmem_barrier_all(); // every signal word is zero before any PE can put
}

void allreduce_small(allreduce *ar, const float *in, float *out, size_t n, cudaStream_t stream) {
  const Layout *lay = (const Layout *)ar->scratch;
  if (n == 0) return;
  if (n > lay->max_n)
    mgpu_fail("learner", "allreduce_small", __FILE__, __LINE__, 0,
              "n is larger than the max_n given to allreduce_setup");
  ar->calls++;
  const unsigned long long epoch = ar->calls; // 1, 2, 3, ... on every PE alike
  size_t chunk = ceil_div(n, kMaxChunks);
  if (chunk < kMinChunk) chunk = kMinChunk;
  chunk = ceil_div(chunk, kAlign) * kAlign;
  const unsigned blocks = (unsigned)ceil_div(n, chunk); // <= kMaxChunks, none empty
  allreduce_kernel<<<blocks, kThreads, 0, stream>>>(ar->slots, ar->signals, in, out, n, chunk,
                                                    lay->max_n, epoch);
  MGPU_KERNEL();
}

void allreduce_teardown(allreduce *ar) {
  nvshmem_free(ar->signals);
  nvshmem_free(ar->slots);
  delete (Layout *)ar->scratch;
  ar->signals = nullptr;
  ar->slots = nullptr;
  ar->scratch = nullptr;
}
