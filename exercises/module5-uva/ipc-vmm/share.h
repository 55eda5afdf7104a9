/*
 * share.h: the functions module5/ipc-vmm asks you to write. Course-owned: the driver includes
 * it too, so do not change it.
 *
 * One process per GPU. Each rank makes a buffer the other processes can map, with CUDA IPC
 * and with the CUDA virtual memory management (VMM) API; the driver carries the handles
 * between the processes and then has your kernel read the previous rank's buffer.
 *
 * The driver API comes as a table (mgpu_cu, csrc/mgpu.h): cu->MemCreate(...) is cuMemCreate,
 * and so on. Check each call with MGPU_CU(...), each runtime call with MGPU_CUDA(...).
 */
#ifndef MODULE5_SHARE_H
#define MODULE5_SHARE_H

#include <stddef.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CUDA IPC ---- */
/* Fills *handle so that another process can map `buf` (the start of a cudaMalloc allocation). */
void ipc_export(void *buf, cudaIpcMemHandle_t *handle);
/* Maps the buffer behind another process's handle into this process; returns its address. */
void *ipc_import(const cudaIpcMemHandle_t *handle);
/* Unmaps what ipc_import mapped. */
void ipc_close(void *peer);

/* ---- VMM: physical memory, shareable as a POSIX file descriptor ---- */
typedef struct vmm_region {
  CUmemGenericAllocationHandle handle; /* the physical memory, created or imported */
  CUdeviceptr ptr;                     /* where it is mapped in this process */
  size_t size;                         /* mapped bytes: `bytes` rounded up to the granularity */
} vmm_region;

/* Creates physical memory of at least `bytes` bytes on `device` that can be exported as a
 * POSIX file descriptor, maps it in this process with read/write access for `device`, fills
 * *out, and returns the exported file descriptor (the driver passes it to the other ranks,
 * then closes it). */
int vmm_create(const mgpu_cu *cu, size_t bytes, int device, vmm_region *out);
/* Imports the memory behind `fd` (another rank's vmm_create, `bytes` long as asked there),
 * maps it in this process with read/write access for `device` (this process's GPU), and fills
 * *out. The driver closes fd after the call. */
void vmm_import(const mgpu_cu *cu, int fd, size_t bytes, int device, vmm_region *out);
/* Unmaps r, frees its address range and releases the handle. */
void vmm_release(const mgpu_cu *cu, vmm_region *r);

/* ---- using it ---- */
/* out[i] = mine[i] + peer[i] for i < n, computed by your kernel on the current GPU, on
 * `stream`. peer is another GPU's memory, mapped by one of the above. Return without waiting. */
void add_peer(float *out, const float *mine, const float *peer, long long n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE5_SHARE_H */
