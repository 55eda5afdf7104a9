// module2/jacobi-sendrecv — variant host-staged: correct, but every halo row travels device ->
// host -> MPI (host buffers) -> host -> device, as it must with an MPI that is not CUDA-aware.
// Pinned staging buffers are kept between calls. Each iteration then moves its edge rows over
// PCIe twice and through a host-to-host copy, instead of GPU to GPU.
#include "jacobi-sendrecv.h"

static float *g_out, *g_in; // pinned: [0] first row, [1] last row
static size_t g_cap;

void jacobi_run(const jac_grid *g, long long first_iter, int iters, cudaStream_t stream) {
  const int nx = g->nx, rows = g->rows;
  const int up = g->rank > 0 ? g->rank - 1 : MPI_PROC_NULL;
  const int down = g->rank < g->world - 1 ? g->rank + 1 : MPI_PROC_NULL;
  const size_t row = (size_t)nx * sizeof(float);
  if (g_cap < (size_t)nx) {
    if (g_out) MGPU_CUDA(cudaFreeHost(g_out));
    if (g_in) MGPU_CUDA(cudaFreeHost(g_in));
    MGPU_CUDA(cudaMallocHost((void **)&g_out, 2 * row));
    MGPU_CUDA(cudaMallocHost((void **)&g_in, 2 * row));
    g_cap = (size_t)nx;
  }
  for (long long k = first_iter; k < first_iter + iters; k++) {
    float *in = g->slab[k % 2], *out = g->slab[(k + 1) % 2];
    MGPU_CUDA(cudaMemcpyAsync(g_out, in + nx, row, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaMemcpyAsync(g_out + nx, in + (size_t)rows * nx, row, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    MGPU_MPI(MPI_Sendrecv(g_out, nx, MPI_FLOAT, up, 0, g_in + nx, nx, MPI_FLOAT, down, 0, g->comm,
                          MPI_STATUS_IGNORE));
    MGPU_MPI(MPI_Sendrecv(g_out + nx, nx, MPI_FLOAT, down, 1, g_in, nx, MPI_FLOAT, up, 1, g->comm,
                          MPI_STATUS_IGNORE));
    if (up != MPI_PROC_NULL)
      MGPU_CUDA(cudaMemcpyAsync(in, g_in, row, cudaMemcpyHostToDevice, stream));
    if (down != MPI_PROC_NULL)
      MGPU_CUDA(cudaMemcpyAsync(in + (size_t)(rows + 1) * nx, g_in + nx, row, cudaMemcpyHostToDevice, stream));
    jac_stencil(in, out, nx, rows, stream);
  }
}
