/*
 * jacobi.cu — variant stale-signal of module4/halo-jacobi (a planted mistake).
 *
 * The reference solution, except that every iteration after the first waits for the same
 * signal value: `chunks`, the count after ONE iteration, instead of k * chunks. The first wait
 * is right; from then on the counters are already past it, so the wait returns at once and the
 * kernel reads whatever the halo holds: usually the rows of two iterations ago. The driver
 * starts some PEs late before each call, so the others run ahead on stale halos every time.
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
    const size_t bytes = (size_t)min(kChunk, nx - c0) * sizeof(float);
    if (send_top) // our first row -> the bottom halo (row top_rows + 1) of the PE above
      nvshmemx_putmem_signal_block(out + (size_t)(top_rows + 1) * nx + c0, dst + c0, bytes,
                                   &sig[1], 1, NVSHMEM_SIGNAL_ADD, top);
    if (send_bottom) // our last row -> the top halo (row 0) of the PE below
      nvshmemx_putmem_signal_block(out + c0, dst + c0, bytes, &sig[0], 1, NVSHMEM_SIGNAL_ADD,
                                   bottom);
  }
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
        (uint64_t)(k > 0 ? chunks : 0)); // MISTAKE: the same value every iteration
    MGPU_KERNEL();
  }
}

void halo_teardown(halo_grid *g) {
  nvshmem_free(g->sig);
  g->sig = nullptr;
  delete g->state;
  g->state = nullptr;
}
