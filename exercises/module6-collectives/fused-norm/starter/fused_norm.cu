/*
 * fused_norm.cu: module6/fused-norm.
 *
 * All-reduce + residual add + RMSNorm in one kernel launch: the one-shot all-reduce of
 * module6/one-shot, with each row's norm taken by the block that sums the row. TASK.md has the
 * details; fused_norm.h and symm_ar.h say exactly what you are given.
 *
 * Plan (the flag layout is yours to choose; AR_FLAG_WORDS words per member):
 *   1. Announce: this member's input for `epoch` is in place (a release store of `epoch` at
 *      system scope into a word of every other member's flags).
 *   2. Wait until every other member has announced this epoch (acquire loads at system scope in
 *      a loop with __nanosleep, then __syncthreads()).
 *   3. For each row of this block (a block per row is simplest):
 *        s = v->in[0][..] + ... + v->in[world-1][..] + residual[..], stored in residual_out;
 *        the sum of s*s over the whole row (block_sum below);
 *        out = s * rsqrtf(sum / hidden + eps) * gamma[i].
 *   4. Tell every other member that this block is done reading its input (a release at system
 *      scope after __syncthreads(), e.g. a count of finished blocks).
 *   5. Do not let the call finish before every other member has told you the same.
 *
 * As shipped, nothing is computed: every case fails at correctness with both outputs still the
 * driver's poison.
 */
#include <cuda/atomic>

#include "fused_norm.h"

namespace {

// The sum of x over the whole block, returned to every thread. `red` is a __shared__ float[32];
// every thread of the block must call it (it has barriers), and blockDim.x must be a multiple of 32.
[[maybe_unused]] __device__ float block_sum(float x, float *red) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  if (lane == 0) red[warp] = x;
  __syncthreads();
  x = lane < nwarps ? red[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  __syncthreads();
  return x;
}

__global__ void fused_kernel(ar_view v, const float *residual, const float *gamma, float eps, float *residual_out,
                             float *out, int rows, int hidden, unsigned int epoch) {
  /* TODO: steps 1 to 5 above (block_sum needs a __shared__ float red[32]). */
  (void)v;
  (void)residual;
  (void)gamma;
  (void)eps;
  (void)residual_out;
  (void)out;
  (void)rows;
  (void)hidden;
  (void)epoch;
}

}  // namespace

void fused_allreduce_rmsnorm(const ar_view *v, const float *residual, const float *gamma, float eps,
                             float *residual_out, float *out, int rows, int hidden, unsigned int epoch,
                             cudaStream_t stream) {
  /* TODO: choose a grid (the same on every member for the same rows) and a block size (a
   * multiple of 32) for hidden. */
  fused_kernel<<<1, 256, 0, stream>>>(*v, residual, gamma, eps, residual_out, out, rows, hidden, epoch);
  MGPU_KERNEL();
}
