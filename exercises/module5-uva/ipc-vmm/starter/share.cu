/*
 * share.cu: module5/ipc-vmm.
 *
 * Share device memory between processes, two ways, then read it from a kernel:
 *   - CUDA IPC: cudaIpcGetMemHandle in the owner, cudaIpcOpenMemHandle in the reader.
 *   - VMM: cu->MemCreate with a POSIX file descriptor as the requested handle type,
 *     cu->MemExportToShareableHandle to get the descriptor; in the reader
 *     cu->MemImportFromShareableHandle, then cu->MemAddressReserve, cu->MemMap and
 *     cu->MemSetAccess. (cu->X is the driver API's cuX: csrc/mgpu.h, mgpu_cu.)
 *
 * As shipped, nothing is shared: the run stops at the first handle.
 * TASK.md has the details.
 */
#include "share.h"

void ipc_export(void *buf, cudaIpcMemHandle_t *handle) {
  /* TODO: cudaIpcGetMemHandle */
  (void)buf;
  (void)handle;
}

void *ipc_import(const cudaIpcMemHandle_t *handle) {
  /* TODO: cudaIpcOpenMemHandle (with cudaIpcMemLazyEnablePeerAccess) */
  (void)handle;
  return NULL;
}

void ipc_close(void *peer) { (void)peer; }

int vmm_create(const mgpu_cu *cu, size_t bytes, int device, vmm_region *out) {
  /* TODO: granularity, MemCreate, reserve + map + access, export as a POSIX fd */
  (void)cu;
  (void)bytes;
  (void)device;
  (void)out;
  return -1;
}

void vmm_import(const mgpu_cu *cu, int fd, size_t bytes, int device, vmm_region *out) {
  /* TODO: import, reserve + map + access */
  (void)cu;
  (void)fd;
  (void)bytes;
  (void)device;
  (void)out;
}

void vmm_release(const mgpu_cu *cu, vmm_region *r) {
  (void)cu;
  (void)r;
}

void add_peer(float *out, const float *mine, const float *peer, long long n, cudaStream_t stream) {
  /* TODO: a kernel, out[i] = mine[i] + peer[i] */
  (void)out;
  (void)mine;
  (void)peer;
  (void)n;
  (void)stream;
}
