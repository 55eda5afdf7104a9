/*
 * peer_common.cuh: what the drivers of module5's copy exercises (copy-engines, peer-stores,
 * tma-peer) share (course-owned; a support file, "../shared/peer_common.cuh"): waiting for every
 * GPU, enabling peer access, host staging, and the byte-by-byte comparison with a pattern.
 *
 * The exercises are split (`verifier: true`, docs/protocol.md §4): compare() has the rank read
 * device memory back in chunks of kStage bytes and hand each chunk over; the verifier, which
 * has no GPU, makes the expected pattern bytes on the CPU and tallies the differences. Before
 * including it, a driver defines kStage (bytes per chunk, a multiple of 4096) and includes
 * <stdint.h> and <string.h>.
 *
 * It also holds the probes of the timed calls (probe_arm, probe_queue; at the end), which look
 * at what no comparison sees: the output of the calls the harness times.
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

/* ---- probes of the timed calls ------------------------------------------------------------ *
 *
 * Timed calls are never compared, and a copy that does the whole work only when it is checked
 * (a correctness case, the first call, a call after a pause, the late call of "after-timing")
 * and part of it when calls come back to back is right whenever it is looked at and fast
 * whenever it is timed. So every timed call is followed, on its stream and inside its timed
 * operation, by a probe: a kernel of one block per destination (at most two) whose kProbes
 * threads each own one of kProbes equal segments of the destination and
 *   1. check: compare with the source the byte of their segment that the previous probe of the
 *      same chain overwrote, right before this call: the call must have written it again;
 *   2. arm: overwrite another byte of their segment, at a place drawn afresh, with the
 *      complement of the source's byte, for the next call to write again.
 * The places come from salts the host draws at queueing time (from the host clock when the
 * chain starts, then a new one for every probe), so no call can know them. A chain is the
 * sequence of probes on one set of destinations in the order they run on one stream: the calls
 * of two ops that write the same destination (yours and the baseline's) share one chain, each
 * counting into counts of its own. The sources must not change while a chain runs.
 *
 * A call that skipped a fraction f of the bytes leaves about f * kProbes complements where the
 * next probe looks, every time (a byte's complement never equals it). Checking fresh places
 * only, with no chain, would find nothing: a skipped part still holds the right bytes from the
 * last call that did write it, since the sources do not change during timing.
 *
 * Cost: one launch of 1 or 2 blocks of 256 threads; each thread loads two bytes of the source,
 * loads and stores one byte of the destination (peer memory: one NVLink round trip, ~1-2 µs)
 * and makes an atomic only for a wrong byte (thread 0 one more for the count checked). Queued
 * with the call, ahead of the harness's gate, it adds a kernel boundary and its own run, a few
 * µs per call, against ~0.7 ms (256 MiB) to ~2.7 ms (1 GiB) for the copies timed here: well
 * under 1 %, and the baseline's calls get the same probe, so that both sides pay it. It cannot
 * leave the timed interval: the harness queues `iters` calls back to back between its two
 * events (docs/harness.md, "Timing"), so whatever runs between two calls lies between them. */
enum { kProbes = 256 };

typedef struct probe_span {
  uint8_t *dst;       /* what the call writes */
  const uint8_t *src; /* what must arrive there */
  size_t n;
} probe_span;

typedef struct probe_chain {
  probe_span span[2];
  int nspans;               /* 1 or 2: the probe's blocks */
  unsigned long long salt;  /* drawn by probe_arm, from the host clock */
  unsigned long long drawn; /* probes queued so far */
  unsigned long long armed; /* the salt of the places that hold complements now */
} probe_chain;

__device__ unsigned long long probe_mix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/* Block k probes span k (see above). Thread t owns bytes [t * seg, (t + 1) * seg) (byte t when
 * n < kProbes), so no thread sees another's complement; with check = 0 it only arms.
 * counts[0] += bytes found wrong, counts[1] += bytes checked. */
__global__ void probe_kernel(probe_span s0, probe_span s1, int check, unsigned long long check_salt,
                             unsigned long long arm_salt, unsigned long long *counts) {
  const probe_span s = blockIdx.x == 0 ? s0 : s1;
  const size_t t = threadIdx.x;
  if (t >= s.n) return;
  const size_t seg = s.n >= (size_t)kProbes ? s.n / kProbes : 1;
  const unsigned long long lane = ((unsigned long long)blockIdx.x << 32) ^ (unsigned long long)t;
  if (check) {
    const size_t i = t * seg + (size_t)(probe_mix(check_salt ^ lane) % seg);
    if (s.dst[i] != s.src[i]) atomicAdd(&counts[0], 1ULL);
    if (t == 0) atomicAdd(&counts[1], (unsigned long long)(s.n < (size_t)kProbes ? s.n : (size_t)kProbes));
  }
  const size_t j = t * seg + (size_t)(probe_mix(arm_salt ^ lane) % seg);
  s.dst[j] = (uint8_t)~s.src[j];
}

static void probe_launch(probe_chain *c, int check, unsigned long long *counts, cudaStream_t stream) {
  const unsigned long long arm = c->salt ^ (0xD1B54A32D192ED03ULL * ++c->drawn);
  probe_kernel<<<c->nspans, kProbes, 0, stream>>>(c->span[0], c->span[1], check, c->armed, arm, counts);
  MGPU_CUDA(cudaGetLastError());
  c->armed = arm;
}

/* Starts a chain on one span or two (s1 is ignored when nspans is 1) whose sources hold what
 * every call will copy: arms the first places, on `stream` (of the current device, which must
 * reach the destinations), so that the first call is checked too. */
static void probe_arm(probe_chain *c, probe_span s0, probe_span s1, int nspans, cudaStream_t stream) {
  memset(c, 0, sizeof *c);
  c->span[0] = s0;
  c->span[1] = nspans > 1 ? s1 : s0;
  c->nspans = nspans > 1 ? 2 : 1;
  c->salt = (unsigned long long)(mgpu_now_us() * 1000.0) ^ ((unsigned long long)(uintptr_t)s0.dst << 17) ^
            ((unsigned long long)(uintptr_t)c << 3);
  probe_launch(c, 0, NULL, stream);
}

/* The probe of one call, queued on `stream` (of the current device) right behind the call:
 * counts the places armed before the call into counts[0..1], then arms new ones. */
static void probe_queue(probe_chain *c, unsigned long long *counts, cudaStream_t stream) {
  probe_launch(c, 1, counts, stream);
}

#endif /* MODULE5_PEER_COMMON_CUH */
