// module6/fused-norm, variant hidden-nccl: no exchange of its own. It makes an NCCL communicator behind the
// driver's back (a unique id passed through a file in the run's rendezvous folder), calls ncclAllReduce (the
// baseline's collective) into residual_out, and then adds the residual and normalizes in a kernel of its own.
// The driver links NCCL for the baseline, so this links; the policy stage must stop it.
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fused_norm.h"

namespace {

ncclComm_t g_comm = nullptr;
int g_world = 0;

ncclComm_t team_comm(const ar_view *v) {
  if (g_comm && g_world == v->world) return g_comm;
  const char *dir = getenv("MGPU_RDZV_DIR");
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/hidden-id-%d-%p", dir ? dir : "/tmp", v->world, (const void *)v->in[0]);
  ncclUniqueId id;
  if (v->rank == 0) {
    MGPU_NCCL(ncclGetUniqueId(&id));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f) {
      fwrite(&id, sizeof id, 1, f);
      fclose(f);
      rename(tmp, path);
    }
  } else {
    for (;;) {
      FILE *f = fopen(path, "rb");
      if (f && fread(&id, sizeof id, 1, f) == 1) {
        fclose(f);
        break;
      }
      if (f) fclose(f);
      usleep(1000);
    }
  }
  MGPU_NCCL(ncclCommInitRank(&g_comm, v->world, id, v->rank));
  g_world = v->world;
  return g_comm;
}

// residual_out holds the all-reduced x: add the residual and normalize, a block per row.
__global__ void add_norm(const float *residual, const float *gamma, float eps, float *residual_out, float *out, int hidden) {
  __shared__ float part[256];
  const long long base = (long long)blockIdx.x * hidden;
  float sq = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float s = residual_out[base + i] + residual[base + i];
    residual_out[base + i] = s;
    sq += s * s;
  }
  part[threadIdx.x] = sq;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const float scale = rsqrtf(part[0] / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[base + i] = residual_out[base + i] * scale * gamma[i];
}

}  // namespace

void fused_allreduce_rmsnorm(const ar_view *v, const float *residual, const float *gamma, float eps,
                             float *residual_out, float *out, int rows, int hidden, unsigned int epoch,
                             cudaStream_t stream) {
  (void)epoch;
  const size_t n = (size_t)rows * (size_t)hidden;
  MGPU_NCCL(ncclAllReduce(v->in[v->rank], residual_out, n, ncclFloat, ncclSum, team_comm(v), stream));
  add_norm<<<rows, 256, 0, stream>>>(residual, gamma, eps, residual_out, out, hidden);
  MGPU_KERNEL();
}
