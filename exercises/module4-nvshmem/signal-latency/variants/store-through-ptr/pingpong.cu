/*
 * pingpong.cu — variant store-through-ptr of module4/signal-latency (a planted mistake).
 *
 * No put at all: the block copies each message into the partner's inbox with plain stores
 * through nvshmem_ptr(inbox, partner), and after a __syncthreads one thread stores the new value
 * into the partner's signal word through nvshmem_ptr(signal, partner). There is no system-scope
 * fence between the data stores and the signal store, so over NVLink the signal can land first
 * and the partner reads a message that is still arriving: the race a put-with-signal avoids.
 * Refused at policy: the exercise forbids nvshmem_ptr (load/store to a peer is module 5).
 */
#include "signal-latency.h"

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread waits until this PE's signal word reaches `value`; the block follows it.
__device__ __forceinline__ void wait_signal(uint64_t *signal, uint64_t value) {
  if (threadIdx.x == 0) {
    nvshmem_signal_wait_until(signal, NVSHMEM_CMP_GE, value);
    __threadfence(); // later loads of this thread are ordered after the signal it observed
  }
  __syncthreads();
}

// For i < bytes, by the whole block: copy[i] = in[i] and out[i] = in[i] ^ key[i]. `in` is the
// inbox, written by another GPU: it is read with __ldcv (no L1 hit: this SM may hold a line of
// an earlier message). in == nullptr means a message of zeros; out or copy may be nullptr.
__device__ void take_message(uint8_t *out, const uint8_t *in, const uint8_t *key, uint8_t *copy,
                             size_t bytes) {
  const uintptr_t addr_bits =
      (uintptr_t)out | (uintptr_t)in | (uintptr_t)key | (uintptr_t)copy;
  if (bytes % 8 == 0 && addr_bits % 8 == 0) {
    const size_t words = bytes / 8;
    for (size_t i = threadIdx.x; i < words; i += blockDim.x) {
      const unsigned long long v = in ? __ldcv((const unsigned long long *)in + i) : 0ull;
      if (copy) ((unsigned long long *)copy)[i] = v;
      if (out) ((unsigned long long *)out)[i] = v ^ ((const unsigned long long *)key)[i];
    }
    return;
  }
  for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) {
    const uint8_t v = in ? __ldcv(in + i) : (uint8_t)0;
    if (copy) copy[i] = v;
    if (out) out[i] = v ^ key[i];
  }
}

__global__ void pingpong_kernel(uint8_t *inbox, uint8_t *outbox, uint64_t *signal,
                                const uint8_t *keys, uint8_t *received, size_t bytes, int rounds,
                                int partner, int initiator, unsigned long long base,
                                unsigned long long *elapsed_ns) {
  const unsigned long long t0 = global_ns();
  for (int r = 0; r < rounds; r++) {
    const uint8_t *key = keys + (size_t)r * bytes;
    if (initiator) {
      if (r == 0) {
        take_message(outbox, nullptr, key, nullptr, bytes);
      } else { // pong[r-1] carried the value base + r
        wait_signal(signal, base + r);
        take_message(outbox, inbox, key, received + (size_t)(r - 1) * bytes, bytes);
      }
    } else { // ping[r] carries base + r + 1
      wait_signal(signal, base + r + 1);
      take_message(outbox, inbox, key, received + (size_t)r * bytes, bytes);
    }
    __syncthreads(); // the whole message is in outbox before the put reads it
    // MISTAKE: stores through nvshmem_ptr, and nothing orders the signal after the data.
    uint8_t *peer_inbox = static_cast<uint8_t *>(nvshmem_ptr(inbox, partner));
    uint64_t *peer_signal = static_cast<uint64_t *>(nvshmem_ptr(signal, partner));
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) peer_inbox[i] = outbox[i];
    __syncthreads();
    if (threadIdx.x == 0) *(volatile uint64_t *)peer_signal = base + r + 1;
  }
  if (initiator) { // the last pong
    wait_signal(signal, base + rounds);
    take_message(nullptr, inbox, nullptr, received + (size_t)(rounds - 1) * bytes, bytes);
  }
  if (threadIdx.x == 0 && elapsed_ns) *elapsed_ns = global_ns() - t0;
}

} // namespace

void pingpong_setup(pingpong *pp, size_t max_bytes) {
  const size_t cap = max_bytes ? max_bytes : 1;
  pp->inbox = nvshmem_malloc(cap);
  pp->inbox_bytes = cap;
  pp->scratch = nvshmem_malloc(cap); // the outbox: where each outgoing message is assembled
  pp->signal = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
  pp->calls = 0;
  pp->sequence = 0;
  nvshmem_barrier_all(); // every signal word is zero before any PE can send
}

void pingpong_run(pingpong *pp, const uint8_t *keys, uint8_t *received, size_t bytes, int rounds,
                  unsigned long long *elapsed_ns, cudaStream_t stream) {
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  const int partner = me ^ 1; // pairs (0,1), (2,3), ...
  if (partner >= npes || rounds <= 0 || bytes == 0) return; // the odd PE out takes no part
  const unsigned long long base = pp->sequence;
  pp->sequence += (unsigned long long)rounds;
  pp->calls++;
  pingpong_kernel<<<1, kThreads, 0, stream>>>((uint8_t *)pp->inbox, (uint8_t *)pp->scratch,
                                              pp->signal, keys, received, bytes, rounds, partner,
                                              (me & 1) == 0, base, elapsed_ns);
  MGPU_KERNEL();
}

void pingpong_teardown(pingpong *pp) {
  nvshmem_free(pp->signal);
  nvshmem_free(pp->scratch);
  nvshmem_free(pp->inbox);
  pp->signal = nullptr;
  pp->scratch = nullptr;
  pp->inbox = nullptr;
}
