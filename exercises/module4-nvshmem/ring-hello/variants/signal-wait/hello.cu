/*
 * Variant signal-wait: a correct alternative without a barrier. One block sends the whole
 * array with a put-with-signal (the signal word on the next PE is set only after the data is
 * there), then waits until the previous PE's signal for this call has reached its own signal
 * word. Point-to-point: each PE waits for its one sender, not for everybody. Expected to pass.
 */
#include "ring-hello.h"

namespace {

uint64_t *g_signal = nullptr; /* symmetric: one signal word per PE */
uint64_t g_calls = 0;         /* the same count on every PE: the value of this call's signal */

__global__ void hello_signal(float *inbox, const float *mine, size_t n, uint64_t *sig,
                             uint64_t seq) {
  const int me = nvshmem_my_pe();
  const int next = (me + 1) % nvshmem_n_pes();
  nvshmemx_float_put_signal_nbi_block(inbox, mine, n, sig, seq, NVSHMEM_SIGNAL_SET, next);
  if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, seq);
  __syncthreads();
}

} // namespace

void *hello_alloc(size_t bytes) {
  if (!g_signal) g_signal = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
  return nvshmem_malloc(bytes);
}

void hello_free(void *p) { nvshmem_free(p); }

void ring_hello(float *inbox, const float *mine, size_t n, cudaStream_t stream) {
  hello_signal<<<1, 1024, 0, stream>>>(inbox, mine, n, g_signal, ++g_calls);
  MGPU_KERNEL();
}
