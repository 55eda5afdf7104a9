/*
 * Variant skips-when-timed: the reference ring, except that it counts its calls and returns
 * without doing anything once it has been called more than 18 times. The correctness cases
 * make 12 calls (6 cases x 2 iterations, on every rank whatever the world size), all of them
 * real. Timing then makes at least 3 warm-up calls, 1 calibration call and 10 rounds of at
 * least one call each (the checker's default min_reps), so calls 19 and later (timed calls
 * among them) do nothing, and so does the driver's extra call after timing with new inputs in
 * the same buffers: recv stays poisoned. Must fail at correctness, case "after-timing".
 *
 * What follows is the reference solution's own description.
 *
 * Ring all-reduce in two phases over `world` chunks of the buffer:
 *   reduce-scatter, world-1 steps: at step s this rank sends chunk (rank-s) to the next rank,
 *     receives chunk (rank-s-1) from the previous one into scratch and adds its own input to
 *     it. After the last step it holds the complete sum of chunk (rank+1).
 *   all-gather, world-1 steps: at step s it sends chunk (rank+1-s) and receives chunk (rank-s)
 *     straight into recv.
 * Every rank sends and receives 2(world-1)/world of the buffer: the bus-bandwidth factor.
 *
 * Speed comes from overlap. Each reduce-scatter chunk is cut into pieces; the transfers run on
 * a private communication stream and the additions on the caller's stream, so piece p is being
 * added while piece p+1 is on the wire. Events carry the two dependencies per piece: "received"
 * (the addition may read scratch) and "reduced" (the sum may be sent on, and the scratch half
 * may be received into again two steps later). Chunk and piece boundaries are multiples of 64
 * floats, so the addition kernel can use 16-byte loads wherever the buffers allow it; chunks
 * are ceil(n/world) rounded up, so any n works, the last chunks being shorter or empty.
 */
#include <stdint.h>

#include "ring-allreduce.h"

namespace {

constexpr int kWorkingCalls = 18; // calls that do the work; every later one returns at once
constexpr int kMaxPieces = 8;
constexpr size_t kAlign = 64;                  // floats: 256-byte boundaries
constexpr size_t kPieceTarget = size_t(2) << 20; // floats per piece, about (8 MiB)
constexpr int kThreads = 256;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
size_t round_up(size_t a, size_t m) { return ceil_div(a, m) * m; }
size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

struct Span {
  size_t begin, len;
};

// Chunk c of the buffer: [c*chunk, (c+1)*chunk) clipped to n.
Span chunk_span(size_t n, size_t chunk, int c) {
  size_t b = min_sz(n, (size_t)c * chunk);
  return Span{b, min_sz(n, b + chunk) - b};
}

// Piece p of a chunk span; empty past its end.
Span piece_span(Span ch, size_t piece, int p) {
  size_t off = min_sz(ch.len, (size_t)p * piece);
  return Span{ch.begin + off, min_sz(ch.len, off + piece) - off};
}

// out = a + b, 16-byte vectors when `vec`, scalar for the rest.
__global__ void add_kernel(float *__restrict__ out, const float *__restrict__ a,
                           const float *__restrict__ b, size_t n, int vec) {
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t done = 0;
  if (vec) {
    const size_t n4 = n / 4;
    const float4 *a4 = reinterpret_cast<const float4 *>(a);
    const float4 *b4 = reinterpret_cast<const float4 *>(b);
    float4 *o4 = reinterpret_cast<float4 *>(out);
    for (size_t i = tid; i < n4; i += stride) {
      float4 x = a4[i], y = b4[i];
      o4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < n; i += stride) out[i] = a[i] + b[i];
}

// Per-process state, created on first use for the device of the first call.
struct RingState {
  int device = -1;
  int max_blocks = 0;
  cudaStream_t comm_stream = nullptr;
  cudaEvent_t start = nullptr, done = nullptr;
  cudaEvent_t received[kMaxPieces] = {};
  cudaEvent_t reduced[kMaxPieces] = {};
};

RingState &ring_state() {
  static RingState s;
  int dev = -1;
  MGPU_CUDA(cudaGetDevice(&dev));
  if (s.device == dev) return s;
  if (s.device != -1)
    mgpu_fail("learner", "ring_allreduce", __FILE__, __LINE__, 0,
              "called on a second device; this implementation keeps one set of streams");
  int sms = 0;
  MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  s.max_blocks = 2 * sms;
  // The transfers are what the additions wait for: give them the higher priority.
  int least = 0, greatest = 0;
  MGPU_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  MGPU_CUDA(cudaStreamCreateWithPriority(&s.comm_stream, cudaStreamNonBlocking, greatest));
  MGPU_CUDA(cudaEventCreateWithFlags(&s.start, cudaEventDisableTiming));
  MGPU_CUDA(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  for (int p = 0; p < kMaxPieces; p++) {
    MGPU_CUDA(cudaEventCreateWithFlags(&s.received[p], cudaEventDisableTiming));
    MGPU_CUDA(cudaEventCreateWithFlags(&s.reduced[p], cudaEventDisableTiming));
  }
  s.device = dev;
  return s;
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

void launch_add(const RingState &s, float *out, const float *a, const float *b, size_t n,
                cudaStream_t stream) {
  const int vec = aligned16(out) && aligned16(a) && aligned16(b);
  const size_t items = vec ? n / 4 + n % 4 : n;
  int blocks = (int)min_sz(ceil_div(items, kThreads), (size_t)s.max_blocks);
  if (blocks < 1) blocks = 1;
  add_kernel<<<blocks, kThreads, 0, stream>>>(out, a, b, n, vec);
  MGPU_KERNEL();
}

// One step's transfer: send `out` to next, receive `in` from prev, as one grouped operation.
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
  static int calls = 0;
  if (++calls > kWorkingCalls) return; // "the result is already there"
  if (n == 0) return;
  if (world == 1) {
    MGPU_CUDA(cudaMemcpyAsync(recv, send, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  RingState &s = ring_state();
  const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
  const size_t chunk = round_up(ceil_div(n, (size_t)world), kAlign);
  int pieces = (int)ceil_div(chunk, kPieceTarget);
  if (pieces > kMaxPieces) pieces = kMaxPieces;
  const size_t piece = round_up(ceil_div(chunk, (size_t)pieces), kAlign);
  bool reduced_pending[kMaxPieces] = {};

  // The communication stream starts after everything already queued on the caller's stream.
  MGPU_CUDA(cudaEventRecord(s.start, stream));
  MGPU_CUDA(cudaStreamWaitEvent(s.comm_stream, s.start, 0));

  // Reduce-scatter.
  for (int step = 0; step < world - 1; step++) {
    const int c_out = ((rank - step) % world + world) % world;
    const int c_in = ((rank - step - 1) % world + world) % world;
    const Span ch_out = chunk_span(n, chunk, c_out), ch_in = chunk_span(n, chunk, c_in);
    // Step 0 sends this rank's own input; later steps send the sum made one step earlier.
    const float *src = step == 0 ? send : recv;
    float *half = scratch + (size_t)(step % 2) * chunk;
    for (int p = 0; p < pieces; p++) {
      const Span po = piece_span(ch_out, piece, p), pi = piece_span(ch_in, piece, p);
      // Piece p was last added on the caller's stream (step-1); both the sum to send and the
      // scratch half to receive into (step-2) are then free.
      if (reduced_pending[p]) MGPU_CUDA(cudaStreamWaitEvent(s.comm_stream, s.reduced[p], 0));
      sendrecv(src + po.begin, po.len, half + (pi.begin - ch_in.begin), pi.len, next, prev, comm,
               s.comm_stream);
      if (pi.len == 0) continue;
      MGPU_CUDA(cudaEventRecord(s.received[p], s.comm_stream));
      MGPU_CUDA(cudaStreamWaitEvent(stream, s.received[p], 0));
      launch_add(s, recv + pi.begin, send + pi.begin, half + (pi.begin - ch_in.begin), pi.len,
                 stream);
      MGPU_CUDA(cudaEventRecord(s.reduced[p], stream));
      reduced_pending[p] = true;
    }
  }

  // All-gather: the first send is the chunk this rank finished last; wait for all its pieces.
  for (int p = 0; p < pieces; p++)
    if (reduced_pending[p]) MGPU_CUDA(cudaStreamWaitEvent(s.comm_stream, s.reduced[p], 0));
  for (int step = 0; step < world - 1; step++) {
    const int c_out = ((rank + 1 - step) % world + world) % world;
    const int c_in = ((rank - step) % world + world) % world;
    const Span ch_out = chunk_span(n, chunk, c_out), ch_in = chunk_span(n, chunk, c_in);
    sendrecv(recv + ch_out.begin, ch_out.len, recv + ch_in.begin, ch_in.len, next, prev, comm,
             s.comm_stream);
  }

  // The caller's stream continues once the last chunk has arrived.
  MGPU_CUDA(cudaEventRecord(s.done, s.comm_stream));
  MGPU_CUDA(cudaStreamWaitEvent(stream, s.done, 0));
}
