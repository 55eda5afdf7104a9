/*
 * peer_common.cuh: what the drivers of module5's copy exercises (copy-engines, peer-stores,
 * tma-peer) share (course-owned; a support file, "../shared/peer_common.cuh"): waiting for every
 * GPU, enabling peer access, host staging, and the byte-by-byte comparison with a pattern.
 *
 * The exercises are split (`verifier: true`, docs/protocol.md §4): compare() has the rank read
 * device memory back in chunks of kStage bytes and hand each chunk over; the verifier, which
 * has no GPU, makes the expected pattern bytes on the CPU and tallies the differences. Before
 * including it, a driver defines kStage (bytes per chunk, a multiple of 4096).
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

/* A count the rank handed over (of GPUs), checked where it arrives: 1..max. */
static void check_handed_count(const char *tag, int n, int max) {
  if (n >= 1 && n <= max) return;
  char msg[160];
  snprintf(msg, sizeof msg, "the rank handed over %d under \"%s\"; its driver counts 1 to %d", n, tag, max);
  mgpu_fail("verifier", "mgpu_hand_over", __FILE__, __LINE__, 0, msg);
}

typedef struct tally {
  long long bad, unwritten, old, first;
} tally;

/* One chunk (bytes [off, off + m) of the compared memory, in got) against the pattern `key`,
 * into t and, when r != NULL, into r. Bytes equal to the `old_key` pattern where it differs from
 * the new one are counted as old. */
static void compare_chunk(const uint8_t *got, size_t off, size_t m, uint64_t key, uint64_t old_key, tally *t,
                          mgpu_result *r, long long index_base) {
  uint8_t want[4096];
  if (r) r->checked += (long long)m;
  for (size_t b = 0; b < m; b += sizeof want) {
    const size_t k = m - b < sizeof want ? m - b : sizeof want;
    mgpu_pattern_fill_host(want, k, key, (long long)(off + b));
    if (memcmp(got + b, want, k) == 0) continue;
    for (size_t j = 0; j < k; j++) {
      const long long i = (long long)(off + b + j);
      const uint8_t w = want[j], g = got[b + j];
      if (g == w) continue;
      if (g == 0xFF) {
        t->unwritten++;
        if (r) r->unwritten++;
      } else {
        t->bad++;
        if (r) r->bad++;
        if (g == mgpu_pattern_byte_k(old_key, i)) t->old++;
      }
      if (t->first < 0) t->first = i;
      if (r && r->nfirst < 8) {
        mgpu_mismatch *mm = &r->first[r->nfirst++];
        mm->i = index_base + i;
        if (g == 0xFF)
          snprintf(mm->got, sizeof mm->got, "0xff(poison)");
        else
          snprintf(mm->got, sizeof mm->got, "0x%02x", g);
        snprintf(mm->want, sizeof mm->want, "0x%02x", w);
      }
    }
  }
}

/* Compares `n` bytes of device memory `dev` with pattern (seed, iter). The rank copies them back
 * in chunks of kStage bytes into `host` (kStage bytes) and hands each over as "<tag>/<chunk>";
 * the verifier compares each chunk as it arrives (compare_chunk) and returns the tally. Bytes
 * equal to pattern (seed, old_iter) where it differs from the new one are counted as old.
 * Mismatches go into r when r != NULL. In the rank, `dev` is read with the current device set;
 * the returned tally is empty there (it compares nothing). */
static tally compare(mgpu_ctx *ctx, const char *tag, const void *dev, size_t n, int iter, int old_iter,
                     uint8_t *host, mgpu_result *r, long long index_base) {
  tally t = {0, 0, 0, -1};
  uint64_t key = 0, old_key = 0;
  if (mgpu_verifies(ctx)) {
    key = mgpu_pattern_key(ctx->seed, iter);
    old_key = mgpu_pattern_key(ctx->seed, old_iter);
  }
  for (size_t off = 0; off < n; off += kStage) {
    const size_t m = n - off < kStage ? n - off : kStage;
    char t_chunk[160];
    if (mgpu_computes(ctx)) MGPU_CUDA(cudaMemcpy(host, (const char *)dev + off, m, cudaMemcpyDefault));
    snprintf(t_chunk, sizeof t_chunk, "%.120s/%zu", tag, off / kStage);
    if (!mgpu_hand_over(ctx, t_chunk, host, m)) continue;
    compare_chunk(host, off, m, key, old_key, &t, r, index_base);
  }
  return t;
}

#endif /* MODULE5_PEER_COMMON_CUH */
