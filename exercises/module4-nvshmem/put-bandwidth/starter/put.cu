/*
 * put.cu — module4/put-bandwidth.
 *
 * Move `bytes` bytes from src (yours) into dst on PE `peer` with NVSHMEM puts from a kernel,
 * as fast as the copy engine (the baseline the check times you against) — or close.
 *
 * Plan (TASK.md has the details):
 *   1. One block can put a range of bytes with nvshmemx_putmem_nbi_block(dst + off, src + off,
 *      len, peer): every thread of the block calls it with the same arguments.
 *   2. One block is far too slow for 256 MiB. Give each of many blocks its own share of the
 *      bytes. Sizes are odd: make sure every byte belongs to exactly one share.
 *   3. _nbi returns before the data has arrived. What makes it arrive before your kernel
 *      (and so the stream) is done?
 *   4. Launch on `stream`, return without waiting.
 *
 * As shipped, nothing is sent: every case fails at correctness.
 */
#include "put-bandwidth.h"

void put_to_peer(void *dst, const void *src, size_t bytes, int peer, cudaStream_t stream) {
  /* TODO */
  (void)dst;
  (void)src;
  (void)bytes;
  (void)peer;
  (void)stream;
}
