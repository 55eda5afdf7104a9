// module5/ipc-vmm, variant copy-2d: add_peer brings the peer's buffer over with the copy engine
// (cudaMemcpy2DAsync of one row, a spelling the forbid list did not name) into a scratch buffer
// of its own and adds locally: the sums are right, but the exercise's kernel never reads the
// peer's memory through the mapping. The policy stage must refuse it (the pattern cudaMemcpy*).
#include <stdint.h>
#include <string.h>

#include "share.h"

// ---- CUDA IPC ----------------------------------------------------------------------------

void ipc_export(void *buf, cudaIpcMemHandle_t *handle) { MGPU_CUDA(cudaIpcGetMemHandle(handle, buf)); }

void *ipc_import(const cudaIpcMemHandle_t *handle) {
  void *p = NULL;
  // The only flag: let the runtime enable peer access between the two GPUs when needed.
  MGPU_CUDA(cudaIpcOpenMemHandle(&p, *handle, cudaIpcMemLazyEnablePeerAccess));
  return p;
}

void ipc_close(void *peer) { MGPU_CUDA(cudaIpcCloseMemHandle(peer)); }

// ---- VMM ---------------------------------------------------------------------------------

// Device memory on `device` that may be exported as a POSIX file descriptor.
static CUmemAllocationProp prop_for(int device) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

// Sizes and addresses of physical memory come in multiples of the granularity.
static size_t round_up(const mgpu_cu *cu, size_t bytes, int device) {
  CUmemAllocationProp p = prop_for(device);
  size_t g = 0;
  MGPU_CU(cu->MemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  return (bytes + g - 1) / g * g;
}

// Reserve addresses, map the memory there, and let `device` read and write it.
static void map_here(const mgpu_cu *cu, vmm_region *r, int device) {
  MGPU_CU(cu->MemAddressReserve(&r->ptr, r->size, 0, 0, 0));
  MGPU_CU(cu->MemMap(r->ptr, r->size, 0, r->handle, 0));
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  MGPU_CU(cu->MemSetAccess(r->ptr, r->size, &access, 1));
}

int vmm_create(const mgpu_cu *cu, size_t bytes, int device, vmm_region *out) {
  CUmemAllocationProp p = prop_for(device);
  out->size = round_up(cu, bytes, device);
  MGPU_CU(cu->MemCreate(&out->handle, out->size, &p, 0));
  map_here(cu, out, device);
  int fd = -1;
  MGPU_CU(cu->MemExportToShareableHandle(&fd, out->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  return fd;
}

void vmm_import(const mgpu_cu *cu, int fd, size_t bytes, int device, vmm_region *out) {
  out->size = round_up(cu, bytes, device);
  // For POSIX descriptors the "OS handle" is the descriptor itself, cast to a pointer.
  MGPU_CU(cu->MemImportFromShareableHandle(&out->handle, (void *)(uintptr_t)fd,
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  map_here(cu, out, device);
}

void vmm_release(const mgpu_cu *cu, vmm_region *r) {
  MGPU_CU(cu->MemUnmap(r->ptr, r->size));
  MGPU_CU(cu->MemAddressFree(r->ptr, r->size));
  MGPU_CU(cu->MemRelease(r->handle));
  memset(r, 0, sizeof *r);
}

// ---- using it ----------------------------------------------------------------------------

// The peer's values come over first with a 2D copy (one row of n floats) into a scratch
// buffer of this GPU, then a local kernel adds.
__global__ void add_kernel(float *out, const float *mine, const float *peer, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = mine[i] + peer[i];
}

void add_peer(float *out, const float *mine, const float *peer, long long n, cudaStream_t stream) {
  static float *scratch = NULL;
  static long long cap = 0;
  if (n > cap) {
    if (scratch) MGPU_CUDA(cudaFree(scratch));
    MGPU_CUDA(cudaMalloc((void **)&scratch, sizeof(float) * (size_t)n));
    cap = n;
  }
  const size_t row = sizeof(float) * (size_t)n;
  MGPU_CUDA(cudaMemcpy2DAsync(scratch, row, peer, row, row, 1, cudaMemcpyDefault, stream));
  long long blocks = (n + 255) / 256;
  if (blocks > 2048) blocks = 2048;
  if (blocks < 1) blocks = 1;
  add_kernel<<<(unsigned)blocks, 256, 0, stream>>>(out, mine, scratch, n);
  MGPU_KERNEL();
}
