/*
 * peer_common.cuh: what the drivers of module5's copy exercises (copy-engines, peer-stores,
 * tma-peer) share (course-owned; a support file, "../shared/peer_common.cuh"): waiting for every
 * GPU, enabling peer access, and the byte-by-byte comparison with a pattern.
 */
#ifndef MODULE5_PEER_COMMON_CUH
#define MODULE5_PEER_COMMON_CUH

static void sync_all(int ndev) {
  for (int d = 0; d < ndev; d++) {
    MGPU_CUDA(cudaSetDevice(d));
    MGPU_CUDA(cudaDeviceSynchronize());
  }
}

static void enable_peer(int from, int to) {
  if (from == to) return;
  int ok = 0;
  MGPU_CUDA(cudaDeviceCanAccessPeer(&ok, from, to));
  if (!ok) {
    char msg[160];
    snprintf(msg, sizeof msg, "GPU %d cannot access GPU %d: this exercise needs peer access", from, to);
    mgpu_fail("driver", "cudaDeviceCanAccessPeer", __FILE__, __LINE__, 0, msg);
  }
  MGPU_CUDA(cudaSetDevice(from));
  cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError();
  else
    MGPU_CUDA(e);
}

typedef struct tally {
  long long bad, unwritten, old, first;
} tally;

/* Compares `n` bytes of device memory with pattern (seed, iter): the expected bytes are made on
 * the current GPU, both sides are copied back in chunks and compared with memcmp, and only
 * chunks that differ are looked at byte by byte. Bytes equal to pattern (seed, old_iter) where
 * it differs from the new one are counted as old. Mismatches go into r when r != NULL. */
static tally compare(const void *dev, size_t n, uint64_t seed, int iter, int old_iter, uint8_t *host,
                     mgpu_result *r, long long index_base) {
  tally t = {0, 0, 0, -1};
  const uint64_t old_key = mgpu_pattern_key(seed, old_iter);
  uint8_t *want = NULL, *h_want = host + kStage;
  MGPU_CUDA(cudaMalloc((void **)&want, n));
  mgpu_fill_pattern(want, n, seed, iter, 0);
  MGPU_CUDA(cudaDeviceSynchronize());
  for (size_t off = 0; off < n; off += kStage) {
    const size_t m = n - off < kStage ? n - off : kStage;
    MGPU_CUDA(cudaMemcpy(host, (const char *)dev + off, m, cudaMemcpyDefault));
    MGPU_CUDA(cudaMemcpy(h_want, want + off, m, cudaMemcpyDefault));
    if (r) r->checked += (long long)m;
    for (size_t b = 0; b < m; b += 4096) {
      const size_t k = m - b < 4096 ? m - b : 4096;
      if (memcmp(host + b, h_want + b, k) == 0) continue;
      for (size_t j = b; j < b + k; j++) {
        const long long i = (long long)(off + j);
        const uint8_t w = h_want[j], got = host[j];
        if (got == w) continue;
        if (got == 0xFF) {
          t.unwritten++;
          if (r) r->unwritten++;
        } else {
          t.bad++;
          if (r) r->bad++;
          if (got == mgpu_pattern_byte_k(old_key, i)) t.old++;
        }
        if (t.first < 0) t.first = i;
        if (r && r->nfirst < 8) {
          mgpu_mismatch *mm = &r->first[r->nfirst++];
          mm->i = index_base + i;
          if (got == 0xFF)
            snprintf(mm->got, sizeof mm->got, "0xff(poison)");
          else
            snprintf(mm->got, sizeof mm->got, "0x%02x", got);
          snprintf(mm->want, sizeof mm->want, "0x%02x", w);
        }
      }
    }
  }
  MGPU_CUDA(cudaFree(want));
  return t;
}

#endif /* MODULE5_PEER_COMMON_CUH */
