/*
 * Variant host-put: NVSHMEM's host-side put on a stream. Correct and fast, but NVSHMEM carries
 * it out with a copy engine (a cudaMemcpyAsync of its own to the peer mapping): the baseline
 * again, not GPU threads putting. Expected to fail at the policy stage.
 */
#include "put-bandwidth.h"

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  nvshmemx_putmem_on_stream(dst, src, bytes, peer, stream);
}
