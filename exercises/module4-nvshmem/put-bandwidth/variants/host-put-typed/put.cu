/*
 * Variant host-put-typed: NVSHMEM's host-initiated put on the stream under a typed name,
 * nvshmemx_char_put_nbi_on_stream, where the manifest once listed only
 * nvshmemx_putmem[_nbi]_on_stream. NVSHMEM performs it with a copy engine over NVLink: right
 * bytes at the baseline's speed, and no put from a kernel. Expected to fail at the policy stage.
 */
#include "put-bandwidth.h"

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  if (bytes == 0) return;
  nvshmemx_char_put_nbi_on_stream((char *)dst, (const char *)src, bytes, peer, stream);
  nvshmemx_quiet_on_stream(stream);
}
