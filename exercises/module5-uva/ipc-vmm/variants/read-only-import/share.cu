// module5/ipc-vmm, variant read-only-import: vmm_import grants this process's GPU read access
// only (CU_MEM_ACCESS_FLAGS_PROT_READ), "since add_peer only reads the peer's buffer". share.h
// asks for read/write, and the next exercises store into a peer's memory through exactly this
// kind of mapping; every sum here is right, so it passed. The driver now asks the CUDA driver
// (cuMemGetAccess) what access the imported mapping gives: correctness must fail ("read-only").
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

// Reserve addresses, map the memory there, and let `device` read (and, when `write`, write) it.
static void map_with(const mgpu_cu *cu, vmm_region *r, int device, bool write) {
  MGPU_CU(cu->MemAddressReserve(&r->ptr, r->size, 0, 0, 0));
  MGPU_CU(cu->MemMap(r->ptr, r->size, 0, r->handle, 0));
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
  MGPU_CU(cu->MemSetAccess(r->ptr, r->size, &access, 1));
}

int vmm_create(const mgpu_cu *cu, size_t bytes, int device, vmm_region *out) {
  CUmemAllocationProp p = prop_for(device);
  out->size = round_up(cu, bytes, device);
  MGPU_CU(cu->MemCreate(&out->handle, out->size, &p, 0));
  map_with(cu, out, device, true);
  int fd = -1;
  MGPU_CU(cu->MemExportToShareableHandle(&fd, out->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  return fd;
}

void vmm_import(const mgpu_cu *cu, int fd, size_t bytes, int device, vmm_region *out) {
  out->size = round_up(cu, bytes, device);
  // For POSIX descriptors the "OS handle" is the descriptor itself, cast to a pointer.
  MGPU_CU(cu->MemImportFromShareableHandle(&out->handle, (void *)(uintptr_t)fd,
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  map_with(cu, out, device, false);  // "add_peer only reads it"
}

void vmm_release(const mgpu_cu *cu, vmm_region *r) {
  MGPU_CU(cu->MemUnmap(r->ptr, r->size));
  MGPU_CU(cu->MemAddressFree(r->ptr, r->size));
  MGPU_CU(cu->MemRelease(r->handle));
  memset(r, 0, sizeof *r);
}

// ---- using it ----------------------------------------------------------------------------

__global__ void add_kernel(float *out, const float *mine, const float *peer, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = mine[i] + peer[i];  // peer[i] is a load over NVLink
}

void add_peer(float *out, const float *mine, const float *peer, long long n, cudaStream_t stream) {
  long long blocks = (n + 255) / 256;
  if (blocks > 2048) blocks = 2048;
  if (blocks < 1) blocks = 1;
  add_kernel<<<(unsigned)blocks, 256, 0, stream>>>(out, mine, peer, n);
  MGPU_KERNEL();
}
