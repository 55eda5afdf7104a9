/*
 * Variant uses-memcpy-peer: the host drives the exchange with the copy engine. Per round: a
 * wait on the stream for the partner's signal, a small kernel that builds the next message, a
 * cudaMemcpyPeerAsync into the partner's inbox (its address from nvshmem_ptr), and a signal
 * raised from the stream. The exercise forbids cudaMemcpyPeerAsync: the message must be put
 * by your kernel. Must fail at the policy stage.
 */
#include "signal-latency.h"

namespace {

// out = in ^ key (in == nullptr: zeros); copy = in.
__global__ void take_message(uint8_t *out, const uint8_t *in, const uint8_t *key, uint8_t *copy,
                             size_t bytes) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint8_t v = in ? in[i] : (uint8_t)0;
    if (copy) copy[i] = v;
    if (out) out[i] = v ^ key[i];
  }
}

} // namespace

void pingpong_setup(pingpong *pp, size_t max_bytes) {
  const size_t cap = max_bytes ? max_bytes : 1;
  pp->inbox = nvshmem_malloc(cap);
  pp->inbox_bytes = cap;
  pp->scratch = nvshmem_malloc(cap);
  pp->signal = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
  pp->calls = 0;
  pp->sequence = 0;
  nvshmem_barrier_all();
}

void pingpong_run(pingpong *pp, const uint8_t *keys, uint8_t *received, size_t bytes, int rounds,
                  unsigned long long *elapsed_ns, cudaStream_t stream) {
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes(), partner = me ^ 1;
  (void)elapsed_ns;
  if (partner >= npes || rounds <= 0 || bytes == 0) return;
  int devices = 0, mine = 0;
  MGPU_CUDA(cudaGetDeviceCount(&devices));
  MGPU_CUDA(cudaGetDevice(&mine));
  void *remote_inbox = nvshmem_ptr(pp->inbox, partner);
  uint8_t *inbox = (uint8_t *)pp->inbox, *outbox = (uint8_t *)pp->scratch;
  const int initiator = (me & 1) == 0;
  const unsigned long long base = pp->sequence;
  pp->sequence += (unsigned long long)rounds;
  const unsigned blocks = (unsigned)((bytes + 255) / 256 < 64 ? (bytes + 255) / 256 : 64);
  for (int r = 0; r < rounds; r++) {
    const uint8_t *key = keys + (size_t)r * bytes;
    if (initiator && r == 0) {
      take_message<<<blocks, 256, 0, stream>>>(outbox, nullptr, key, nullptr, bytes);
    } else {
      nvshmemx_signal_wait_until_on_stream(pp->signal, NVSHMEM_CMP_GE,
                                           base + (initiator ? r : r + 1), stream);
      take_message<<<blocks, 256, 0, stream>>>(
          outbox, inbox, key, received + (size_t)(initiator ? r - 1 : r) * bytes, bytes);
    }
    MGPU_KERNEL();
    MGPU_CUDA(cudaMemcpyPeerAsync(remote_inbox, partner % devices, outbox, mine, bytes, stream));
    nvshmemx_signal_op_on_stream(pp->signal, base + r + 1, NVSHMEM_SIGNAL_SET, partner, stream);
  }
  if (initiator) {
    nvshmemx_signal_wait_until_on_stream(pp->signal, NVSHMEM_CMP_GE, base + rounds, stream);
    take_message<<<blocks, 256, 0, stream>>>(nullptr, inbox, nullptr,
                                              received + (size_t)(rounds - 1) * bytes, bytes);
    MGPU_KERNEL();
  }
}

void pingpong_teardown(pingpong *pp) {
  nvshmem_free(pp->signal);
  nvshmem_free(pp->scratch);
  nvshmem_free(pp->inbox);
}
