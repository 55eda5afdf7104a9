/*
 * ring-hello.h — what you write for module4/ring-hello (course-owned: do not edit).
 *
 * One process per GPU, each one NVSHMEM processing element (PE). The driver starts NVSHMEM
 * (mgpu_nvshmem_init), makes the data, calls these functions on every PE and checks the result.
 */
#ifndef MODULE4_RING_HELLO_H
#define MODULE4_RING_HELLO_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns `bytes` bytes that every PE can address as the same object: the inbox that the
 * previous PE writes into. Called on every PE, in the same order, with the same size (it is
 * a collective call). The driver poisons the memory itself; its content on return does not
 * matter. */
void *hello_alloc(size_t bytes);

/* Releases what hello_alloc returned. Collective, like hello_alloc. */
void hello_free(void *p);

/* Every PE calls this with its own `mine` (n floats in ordinary device memory, written by
 * earlier work on `stream`) and the same symmetric `inbox` (n floats inside hello_alloc's
 * memory). Send `mine` into the inbox of the next PE, (my PE + 1) mod (number of PEs), from a
 * kernel. Enqueue everything on `stream` and return without waiting: once `stream` has
 * passed your work, THIS PE's inbox must hold what the previous PE sent. The driver reads the
 * inbox right after your work on `stream`, and nothing else synchronizes the PEs. */
void ring_hello(float *inbox, const float *mine, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE4_RING_HELLO_H */
