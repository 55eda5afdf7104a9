// module6/nccl-device, variant copy-engine: the device API only for the peers' addresses and the
// barriers; the data itself is moved by the copy engine. A kernel writes the team's
// ncclGetPeerPointer addresses into mapped host memory, the host reads them, and the call queues
// an LSA barrier kernel, one cudaMemcpyAsync per team rank from its input into a local buffer,
// and a kernel that sums the copies and meets the peers at the second barrier. Right on every
// team, so only the policy stage can refuse it: the forbidden list named no copy call at all.
#include <stdint.h>

#include "nccl_dev.h"

namespace {

constexpr int kThreads = 512;
constexpr int kMaxTeam = 8;

__global__ void k_pointers(nd_args a, const float **dst) {
  if (threadIdx.x < a.team.nRanks)
    dst[threadIdx.x] = (const float *)ncclGetPeerPointer(a.win, a.in_offset, a.team, threadIdx.x);
}

__global__ void k_barrier(nd_args a) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), a.dev, a.team, a.dev.lsaBarrier, blockIdx.x);
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

__global__ void k_sum(nd_args a, const float *copies) {
  const size_t n = a.n;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float s = 0.f;
    for (int p = 0; p < a.team.nRanks; p++) s += copies[(size_t)p * n + i];
    a.out[i] = s;
  }
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), a.dev, a.team, a.dev.lsaBarrier, blockIdx.x);
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

float *g_copies;
size_t g_floats;

}  // namespace

extern "C" void allreduce_device(const nd_args *a, cudaStream_t stream) {
  const float **ptrs = nullptr;
  MGPU_CUDA(cudaHostAlloc((void **)&ptrs, sizeof(const float *) * kMaxTeam, cudaHostAllocMapped));
  const float **dptrs = nullptr;
  MGPU_CUDA(cudaHostGetDevicePointer((void **)&dptrs, ptrs, 0));
  k_pointers<<<1, 32, 0, stream>>>(*a, dptrs);
  MGPU_KERNEL();
  MGPU_CUDA(cudaStreamSynchronize(stream));
  const size_t need = a->n * (size_t)a->team.nRanks;
  if (need > g_floats) {
    if (g_copies) MGPU_CUDA(cudaFree(g_copies));
    MGPU_CUDA(cudaMalloc((void **)&g_copies, sizeof(float) * need));
    g_floats = need;
  }
  k_barrier<<<1, kThreads, 0, stream>>>(*a);
  MGPU_KERNEL();
  for (int p = 0; p < a->team.nRanks; p++)
    MGPU_CUDA(cudaMemcpyAsync(g_copies + (size_t)p * a->n, ptrs[p], sizeof(float) * a->n, cudaMemcpyDeviceToDevice, stream));
  k_sum<<<1, kThreads, 0, stream>>>(*a, g_copies);
  MGPU_KERNEL();
  MGPU_CUDA(cudaFreeHost(ptrs));
}
