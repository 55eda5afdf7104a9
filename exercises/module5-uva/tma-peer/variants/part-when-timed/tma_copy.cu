// module5/tma-peer, variant part-when-timed: the reference solution, except that a call made
// less than 15 ms after the previous call on the same stream bulk-copies the first 7/8 of the
// 16-byte-aligned body only (the head and tail bytes still right). The correctness cases call
// each GPU's stream once per case, more than 20 ms apart (the driver's delay kernel lies
// between), and the first call of the timing follows a pause too: those copy every byte. The
// timed calls come back to back, and moving 7/8 of the bytes in the time of 7/8 turns 0.88 of
// the copy engine into 1.0, inside [0.85, 1.1]; the PTX holds the TMA's bulk stores. Whether
// the late call of "after-timing" copies everything depends on how long the driver takes to
// refill src, so that check alone cannot be counted on. The probe behind every timed call
// finds bytes it overwrote before the call still overwritten: the run must fail at
// correctness, case after-timing, saying that a timed call left bytes of dst unwritten.
#include <stdint.h>
#include <time.h>

#include "tma_peer.h"

// Chunks of 32 KiB, a ring of kStages of them per block in dynamic shared memory.
constexpr uint32_t kChunk = 32 * 1024;
constexpr int kStages = 6;
constexpr size_t kSmem = (size_t)kStages * kChunk + kStages * sizeof(uint64_t);

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

// An mbarrier that completes when one arrival and `bytes` of bulk-copy traffic have happened.
__device__ __forceinline__ void mbar_init(uint64_t *bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  }
}

// Global -> shared, completion counted on `bar`.
__device__ __forceinline__ void bulk_load(void *smem, const void *gsrc, uint32_t bytes, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(smem)),
      "l"(gsrc), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// Shared -> global (here: the peer's memory), tracked by bulk groups.
__device__ __forceinline__ void bulk_store(void *gdst, const void *smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst), "r"(smem_addr(smem)),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// At most one group (the newest) may still be reading shared memory.
__device__ __forceinline__ void bulk_wait_read_all_but_newest() {
  asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Bulk-copies body bytes [0, done) (done = body: all of them) and the head and tail bytes.
__global__ void tma_kernel(char *dst, const char *src, size_t head, size_t body, size_t done, size_t tail) {
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t *bars = reinterpret_cast<uint64_t *>(smem + (size_t)kStages * kChunk);

  // The unaligned ends, byte by byte (block 0).
  if (blockIdx.x == 0) {
    if (threadIdx.x < head) dst[threadIdx.x] = src[threadIdx.x];
    if (threadIdx.x < tail) dst[head + body + threadIdx.x] = src[head + body + threadIdx.x];
  }
  if (threadIdx.x != 0 || done == 0) return;

  const char *s = src + head;
  char *d = dst + head;
  const size_t nchunks = (done + kChunk - 1) / kChunk;
  // This block's chunks: blockIdx.x, blockIdx.x + gridDim.x, ...
  const size_t mine = nchunks > blockIdx.x ? (nchunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  if (mine == 0) return;
  for (int k = 0; k < kStages; k++) mbar_init(&bars[k]);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");

  auto chunk_of = [&](size_t j) { return blockIdx.x + j * gridDim.x; };
  auto len_of = [&](size_t c) { return (uint32_t)(done - c * kChunk < kChunk ? done - c * kChunk : kChunk); };
  auto load = [&](size_t j) {
    const int st = (int)(j % kStages);
    const size_t c = chunk_of(j);
    const uint32_t len = len_of(c);
    mbar_expect(&bars[st], len);
    bulk_load(smem + (size_t)st * kChunk, s + c * kChunk, len, &bars[st]);
  };

  for (size_t j = 0; j < mine && j < (size_t)kStages; j++) load(j);  // fill the ring
  for (size_t j = 0; j < mine; j++) {
    const int st = (int)(j % kStages);
    const size_t c = chunk_of(j);
    mbar_wait(&bars[st], (uint32_t)((j / kStages) & 1));
    bulk_store(d + c * kChunk, smem + (size_t)st * kChunk, len_of(c));
    // Refill the buffer of the previous chunk once its store has read it.
    if (j >= 1 && j - 1 + kStages < mine) {
      bulk_wait_read_all_but_newest();
      load(j - 1 + kStages);
    }
  }
  bulk_wait_all();  // every store has completed before the kernel ends
}

static double now_ms() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// Was the previous call on `stream` less than 15 ms ago? (One stream per GPU: the correctness
// cases call every GPU once, back to back, and must not count as close.)
static bool close_together(cudaStream_t stream) {
  enum { kSlots = 64 };
  static cudaStream_t streams[kSlots];
  static double last[kSlots];
  const double t = now_ms();
  for (int k = 0; k < kSlots; k++) {
    if (streams[k] == stream) {
      const bool close = t - last[k] < 15.0;
      last[k] = t;
      return close;
    }
    if (!streams[k]) {
      streams[k] = stream;
      last[k] = t;
      return false;
    }
  }
  return false;
}

void tma_copy(void *dst, const void *src, size_t bytes, int sms, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    MGPU_CUDA(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmem));
    configured = true;
  }
  size_t head = (16 - (uintptr_t)src % 16) % 16;
  if (head > bytes) head = bytes;
  const size_t body = (bytes - head) / 16 * 16;
  const size_t tail = bytes - head - body;
  const size_t done = close_together(stream) ? body - body / 16 / 8 * 16 : body;  // a multiple of 16
  // One block per SM of the limit: each block's single thread keeps its TMA unit busy.
  tma_kernel<<<sms, 32, kSmem, stream>>>((char *)dst, (const char *)src, head, body, done, tail);
  MGPU_KERNEL();
}
