// module6/fused-norm, variant norm-of-partial: takes each row's mean of squares from what this member has
// locally (its own input plus the residual) instead of from the full sum s, as if the norm could start before
// the peers' inputs are added. residual_out is right; out is scaled by the wrong statistic on every team of two
// or more (a team of one cannot tell the difference).
//
// One kernel per call: the one-shot all-reduce of module6/one-shot with the residual add and the
// RMSNorm of each row done by the block that sums the row. Flag words of every member's area:
//   READY + q  the last epoch whose input member q has announced to this member (a value);
//   DONE + q   how many blocks of member q have finished reading this member's input, over all
//              epochs since the flags were zeroed (a count: epoch * gridDim.x after epoch e).
#include <stdint.h>

#include <cuda/atomic>

#include "fused_norm.h"

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxBlocks = 1024;
constexpr int kUnroll = 4;
constexpr int READY = 0;
constexpr int DONE = AR_MAX_RANKS;

using sys_flag = cuda::atomic_ref<unsigned int, cuda::thread_scope_system>;

// The sum of x over the block, in every thread. `red` holds 32 floats; the block may call it again
// right away (the second barrier keeps the next call's writes behind this call's reads).
__device__ float block_sum(float x, float *red) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  if (lane == 0) red[warp] = x;
  __syncthreads();
  x = lane < nwarps ? red[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  __syncthreads();
  return x;
}

// VEC: hidden % 4 == 0 and every pointer 16-byte aligned, so a row is hidden / 4 float4s.
template <bool VEC>
__global__ void __launch_bounds__(kMaxThreads)
    fused_kernel(ar_view v, const float *__restrict__ residual, const float *__restrict__ gamma, float eps,
                 float *__restrict__ residual_out, float *__restrict__ out, int rows, int hidden, unsigned int epoch) {
  __shared__ float red[32];
  const int me = v.rank, world = v.world, t = threadIdx.x;

  // 1. Block 0 tells every other member that this member's input for `epoch` is in place.
  if (blockIdx.x == 0 && t < world && t != me) sys_flag(v.flags[t][READY + me]).store(epoch, cuda::memory_order_release);

  // 2. Every block waits until every other member's input is in place.
  if (t < world && t != me) {
    sys_flag ready(v.flags[me][READY + t]);
    while (ready.load(cuda::memory_order_acquire) < epoch) __nanosleep(32);
  }
  __syncthreads();

  // 3. One row at a time per block: s = sum of the inputs + residual, stored in residual_out, and
  //    the sum of s^2 over the row; then out = s * rsqrt(mean + eps) * gamma, re-reading s from
  //    residual_out (each thread reads back only what it wrote itself).
  const float inv_hidden = 1.0f / (float)hidden;
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long base = (long long)row * hidden;
    float sq = 0.0f;
    if (VEC) {
      // kUnroll float4s per thread and member at once, so that their loads over NVLink overlap.
      const int h4 = hidden / 4;
      const long long b4 = base / 4;
      for (int i0 = t; i0 < h4; i0 += kUnroll * blockDim.x) {
        float4 s[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
          const int i = i0 + u * blockDim.x;
          if (i < h4) s[u] = reinterpret_cast<const float4 *>(residual)[b4 + i];
        }
        for (int p = 0; p < world; p++) {
          const float4 *in = reinterpret_cast<const float4 *>(v.in[p]) + b4;
#pragma unroll
          for (int u = 0; u < kUnroll; u++) {
            const int i = i0 + u * blockDim.x;
            if (i < h4) {
              const float4 x = in[i];
              s[u].x += x.x;
              s[u].y += x.y;
              s[u].z += x.z;
              s[u].w += x.w;
            }
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
          const int i = i0 + u * blockDim.x;
          if (i < h4) {
            reinterpret_cast<float4 *>(residual_out)[b4 + i] = s[u];
            const float4 r = reinterpret_cast<const float4 *>(residual)[b4 + i];
            const float4 o = reinterpret_cast<const float4 *>(v.in[me])[b4 + i];
            const float4 mine = make_float4(r.x + o.x, r.y + o.y, r.z + o.z, r.w + o.w);  // own part only
            sq += mine.x * mine.x + mine.y * mine.y + mine.z * mine.z + mine.w * mine.w;  // not s
          }
        }
      }
    } else {
      for (int i = t; i < hidden; i += blockDim.x) {
        float s = residual[base + i];
        const float mine = s + v.in[me][base + i];  // own part only
        for (int p = 0; p < world; p++) s += v.in[p][base + i];
        residual_out[base + i] = s;
        sq += mine * mine;  // not s
      }
    }
    const float scale = rsqrtf(block_sum(sq, red) * inv_hidden + eps);
    if (VEC) {
      const int h4 = hidden / 4;
      const long long b4 = base / 4;
      for (int i = t; i < h4; i += blockDim.x) {
        const float4 s = reinterpret_cast<const float4 *>(residual_out)[b4 + i];
        const float4 g = reinterpret_cast<const float4 *>(gamma)[i];
        reinterpret_cast<float4 *>(out)[b4 + i] =
            make_float4(s.x * scale * g.x, s.y * scale * g.y, s.z * scale * g.z, s.w * scale * g.w);
      }
    } else {
      for (int i = t; i < hidden; i += blockDim.x) out[base + i] = residual_out[base + i] * scale * gamma[i];
    }
  }

  // 4. This block is done reading everyone's input: count it in at every other member (release).
  __syncthreads();
  if (t < world && t != me) sys_flag(v.flags[t][DONE + me]).fetch_add(1u, cuda::memory_order_release);

  // 5. The call must not finish while a member may still read this member's input.
  if (blockIdx.x == 0 && t < world && t != me) {
    sys_flag finished(v.flags[me][DONE + t]);
    const unsigned int target = epoch * gridDim.x;
    while (finished.load(cuda::memory_order_acquire) < target) __nanosleep(32);
  }
}

}  // namespace

void fused_allreduce_rmsnorm(const ar_view *v, const float *residual, const float *gamma, float eps,
                             float *residual_out, float *out, int rows, int hidden, unsigned int epoch,
                             cudaStream_t stream) {
  // A block per row (the same grid on every member for the same rows: the DONE counts rely on it),
  // with about four elements (or float4s) per thread.
  uintptr_t bits = (uintptr_t)residual | (uintptr_t)gamma | (uintptr_t)residual_out | (uintptr_t)out;
  for (int p = 0; p < v->world; p++) bits |= (uintptr_t)v->in[p];
  const bool vec = hidden % 4 == 0 && (bits & 15) == 0;
  const int per_thread = vec ? 16 : 4;
  int threads = (hidden + per_thread - 1) / per_thread;
  threads = (threads + 31) / 32 * 32;
  if (threads < 32) threads = 32;
  if (threads > kMaxThreads) threads = kMaxThreads;
  const int blocks = rows < kMaxBlocks ? rows : kMaxBlocks;
  if (vec)
    fused_kernel<true><<<blocks, threads, 0, stream>>>(*v, residual, gamma, eps, residual_out, out, rows, hidden, epoch);
  else
    fused_kernel<false><<<blocks, threads, 0, stream>>>(*v, residual, gamma, eps, residual_out, out, rows, hidden, epoch);
  MGPU_KERNEL();
}
