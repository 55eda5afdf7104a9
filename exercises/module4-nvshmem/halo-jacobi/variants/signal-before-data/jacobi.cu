/*
 * jacobi.cu — variant signal-before-data of module4/halo-jacobi (a planted mistake).
 *
 * The edge blocks compute their chunk and signal the neighbour at once (nvshmemx_signal_op),
 * and the edge rows themselves are sent afterwards by a second kernel of this PE's own,
 * send_edges, launched on the same stream after the stencil kernel: its blocks put the rows
 * (nvshmemx_putmem_block, from the GPU). The stream orders those puts after the stencil kernel,
 * but the signals already went out inside it: the neighbour's wait returns before the data has
 * landed and it reads the rows of two iterations ago. The signal must travel after the data it
 * announces (nvshmemx_putmem_signal_block, or a fence between the put and the signal).
 */
#include "halo-jacobi.h"

namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;
constexpr int kChunk = kThreads * kPerThread; // columns per block

} // namespace

struct halo_state {
  int chunks; // blocks per row, the same on every PE (same nx)
};

__global__ void __launch_bounds__(kThreads)
    jacobi_step(const float *in, float *out, int nx, int rows, int chunks, int top, int top_rows,
                int bottom, uint64_t *sig, uint64_t need) {
  const int chunk = blockIdx.x % chunks;
  const int k = blockIdx.x / chunks; // 0: first row, 1: last row, then rows 2 .. rows-1
  const int r = k == 0 ? 1 : (k == 1 ? rows : k);
  const bool first = r == 1, last = r == rows;
  const bool wait_top = first && top >= 0 && need > 0;
  const bool wait_bottom = last && bottom >= 0 && need > 0;

  if (wait_top || wait_bottom) {
    if (threadIdx.x == 0) {
      if (wait_top) nvshmem_signal_wait_until(&sig[0], NVSHMEM_CMP_GE, need);
      if (wait_bottom) nvshmem_signal_wait_until(&sig[1], NVSHMEM_CMP_GE, need);
      __threadfence();
    }
    __syncthreads();
  }

  const int c0 = chunk * kChunk;
  float *dst = out + (size_t)r * nx;
#pragma unroll
  for (int j = 0; j < kPerThread; j++) {
    const int c = c0 + j * kThreads + threadIdx.x;
    if (c < nx) dst[c] = halo_point(in, nx, r, c);
  }

  const bool send_top = first && top >= 0, send_bottom = last && bottom >= 0;
  if (send_top || send_bottom) {
    __syncthreads(); // the chunk is complete in `out` before the block copies it out
    // MISTAKE: "this chunk is ready" goes out now; the data only in the next kernel.
    if (threadIdx.x == 0) {
      if (send_top) nvshmemx_signal_op(&sig[1], 1, NVSHMEM_SIGNAL_ADD, top);
      if (send_bottom) nvshmemx_signal_op(&sig[0], 1, NVSHMEM_SIGNAL_ADD, bottom);
    }
  }
}

// The rows, one chunk per block: blockIdx.y 0 sends the first row up, 1 the last row down.
__global__ void __launch_bounds__(kThreads)
    send_edges(float *out, int nx, int rows, int top, int top_rows, int bottom) {
  const int c0 = blockIdx.x * kChunk;
  const size_t bytes = (size_t)min(kChunk, nx - c0) * sizeof(float);
  if (blockIdx.y == 0 && top >= 0) // our first row -> the bottom halo of the PE above
    nvshmemx_putmem_block(out + (size_t)(top_rows + 1) * nx + c0, out + nx + c0, bytes, top);
  if (blockIdx.y == 1 && bottom >= 0) // our last row -> the top halo of the PE below
    nvshmemx_putmem_block(out + c0, out + (size_t)rows * nx + c0, bytes, bottom);
}

void halo_setup(halo_grid *g) {
  halo_state *st = new halo_state;
  st->chunks = (g->nx + kChunk - 1) / kChunk;
  // Collective; zeroed, and every PE has finished zeroing before anyone returns.
  g->sig = static_cast<uint64_t *>(nvshmem_calloc(2, sizeof(uint64_t)));
  if (g->sig == nullptr)
    mgpu_fail("learner", "nvshmem_calloc", __FILE__, __LINE__, 0,
              "no room for 2 signal words in the symmetric heap");
  g->nsig = 2;
  g->state = st;
}

void halo_jacobi(const halo_grid *g, long long first_iter, int iters, cudaStream_t stream) {
  const int top = g->pe > 0 ? g->pe - 1 : -1;
  const int bottom = g->pe < g->npes - 1 ? g->pe + 1 : -1;
  const int top_rows = top >= 0 ? halo_rows_of(top, g->npes, g->ny) : 0;
  const int chunks = g->state->chunks;
  for (long long k = first_iter; k < first_iter + iters; k++) {
    const float *in = g->slab[k & 1];
    float *out = g->slab[(k + 1) & 1];
    jacobi_step<<<(unsigned)(g->rows * chunks), kThreads, 0, stream>>>(
        in, out, g->nx, g->rows, chunks, top, top_rows, bottom, g->sig,
        (uint64_t)k * (uint64_t)chunks);
    MGPU_KERNEL();
    // MISTAKE: the data follows in a kernel of its own, after the signals have gone out.
    send_edges<<<dim3((unsigned)chunks, 2), kThreads, 0, stream>>>(out, g->nx, g->rows, top,
                                                                    top_rows, bottom);
    MGPU_KERNEL();
  }
}

void halo_teardown(halo_grid *g) {
  nvshmem_free(g->sig);
  g->sig = nullptr;
  delete g->state;
  g->state = nullptr;
}
