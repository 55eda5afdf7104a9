/*
 * driver.cu — module2/pingpong (course-owned).
 *
 * One process per GPU, started by mpirun with a CUDA-aware MPI. mgpu_init picks this rank's
 * GPU (local rank % GPUs) before MPI_Init, so the MPI library finds the right device current.
 * The driver refuses to go on when the MPI says it is not CUDA-aware (MPIX_Query_cuda_support
 * returns 0): a device pointer handed to such an MPI crashes the process.
 *
 * Pairs: (0, 1), (2, 3), ...; with an odd rank count the last rank has no partner.
 *
 * Correctness, per case (n = bytes), kRounds rounds, each with fresh data:
 *   1. recv is poisoned (0xFF); send gets this rank's "stale" pattern, and the stream is
 *      synchronized: that is what send holds before the round's data exists.
 *   2. All ranks meet (MPI_Barrier on MPI_COMM_WORLD). Then a kDelayUs spin kernel and the fill
 *      of send with this round's pattern are queued on the stream (non-blocking, so nothing
 *      else orders work behind them), and pingpong() is called at once. Code that hands send
 *      to MPI before the stream has finished ships the stale pattern: every time, not once in
 *      a while, because the fill is still 20 ms away.
 *   3. Every byte of recv is compared with the partner's pattern of the round (the sender's own
 *      pattern, mgpu_fill_rank_pattern: it depends on the seed, the round AND the sender's rank,
 *      so bytes from the wrong rank fail). Mismatches are also classified: the partner's stale
 *      pattern (the stream was not synchronized), this rank's own pattern (the partner echoed
 *      recv instead of sending its send), poison (nothing arrived). send must be unchanged, the
 *      guard bands around both buffers untouched; a rank without a partner must leave recv
 *      poisoned.
 *   4. The pp_stats the learner returns must be consistent: one_way_us > 0, gbps =
 *      bytes / one_way_us within 2 %, and 2 x reps x one_way_us no longer than the call took.
 *
 * The checks are each rank's verifier's (`verifier: true`, docs/protocol.md §4), on the CPU:
 * per round the rank hands over recv and send as it read them back, the pp_stats it got and
 * how long the call took; per case, the guard count. A rank can make its own patterns only,
 * never its partner's. The verifier makes no MPI or CUDA call (it has no GPU and is not one of
 * mpirun's processes).
 *
 * Performance (headline 128MiB; metric algbw, bytes = 2n per round trip, so the figure is the
 * one-way bandwidth): the learner's ping-pong against the copy engine moving the same bytes
 * between the same two GPUs in the same run: cudaMemcpyPeerAsync from the even rank's buffer
 * into the odd rank's, then from the odd rank's into the even rank's, queued on the even rank's
 * stream. The baseline has buffers of its own (so it never meets the MPI library's cache of
 * IPC mappings of the learner's buffers); the even rank reaches its partner's through CUDA IPC
 * handles (cudaIpcGetMemHandle, shared with mgpu_share, opened with cudaIpcOpenMemHandle).
 *
 * The timing is the driver's own, not mgpu_time_pair: MPI_Send/MPI_Recv block the host until
 * the data has moved, and Open MPI's CUDA copies run on streams that a gate kernel on the
 * default stream would hold back. So every sample is: all ranks meet (MPI_Barrier), then
 * `iters` operations back to back, timed with the host clock to their end (the learner's
 * call returns when the data is in recv; the copies end at cudaStreamSynchronize; the copies
 * are also timed with CUDA events). Yours and the baseline alternate (ABAB); each sample is
 * the maximum over all ranks (MPI_Allreduce), so every rank records the same series. After
 * the timing, one more round with fresh data is checked (case "timed-<perf case>"), by the
 * verifier like the others.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <cuda_runtime.h>

#include "mgpu.h"
#include "pingpong.h"

enum { kRounds = 3, kCheckReps = 2, kMaxSamples = 200 };
static const double kDelayUs = 20000.0;   /* the fill waits this long behind a spin kernel */
static const double kSampleUs = 2000.0;   /* a timing sample lasts at least this long */
static const size_t kMaxBytes = 1u << 30; /* MPI counts are ints; cases stay far below */

/* ---- data ---------------------------------------------------------------------------------- */

/* Pattern iterations: fresh data of round r of case c, and what send holds before it. Every
 * rank's pattern is its own (mgpu_rank_pattern_key): a split rank can make its own only. */
static int fresh_iter(int c, int round) { return c * 64 + 2 * round; }
static int stale_iter(int c, int round) { return c * 64 + 2 * round + 1; }

/* mgpu_pattern_byte_k's definition (docs/harness.md): byte i is byte i & 7 of
 * mix(key ^ (i >> 3)). Here a word at a time, for 128 MiB per round. */
static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

typedef struct counts {
  long long bad, unwritten, stale, own;
} counts;

/* Compares the n bytes at got with the pattern of key `want`. mode 0: bytes equal to the
 * pattern match; a mismatch that is 0xFF is "unwritten", one that equals pattern `stale` (or
 * `own`) is counted as such as well. mode 1: every byte must still be 0xFF (poison). */
static counts compare_bytes(const uint8_t *got, long long n, uint64_t want, uint64_t stale,
                            uint64_t own, int mode) {
  counts k = {0, 0, 0, 0};
  long long w;
  for (w = 0; w * 8 < n; w++) {
    const long long at = w * 8;
    const int m = n - at < 8 ? (int)(n - at) : 8;
    uint64_t pw, ps = 0, po = 0;
    int b, other = 0;
    if (mode == 1) {
      for (b = 0; b < m; b++) k.bad += got[at + b] != 0xFF;
      continue;
    }
    pw = mix64(want ^ (uint64_t)w);
    if (m == 8) {
      uint64_t g8;
      memcpy(&g8, got + at, 8); /* little-endian, like the pattern's bytes */
      if (g8 == pw) continue;
    }
    for (b = 0; b < m; b++) {
      const uint8_t g = got[at + b];
      if (g == (uint8_t)(pw >> (8 * b))) continue;
      if (!other) {
        ps = mix64(stale ^ (uint64_t)w);
        po = mix64(own ^ (uint64_t)w);
        other = 1;
      }
      if (g == 0xFF) k.unwritten++;
      else k.bad++;
      if (g == (uint8_t)(ps >> (8 * b))) k.stale++;
      if (g == (uint8_t)(po >> (8 * b))) k.own++;
    }
  }
  return k;
}

/* Adds up to 8 first mismatches of got against pattern key `want` (0xFF everywhere in mode 1). */
static void first_mismatches(const uint8_t *got, long long n, uint64_t want, int mode,
                             mgpu_result *r) {
  long long j;
  for (j = 0; j < n && r->nfirst < 8; j++) {
    const unsigned e = mode == 1 ? 0xFFu : mgpu_pattern_byte_k(want, j);
    mgpu_mismatch *mm;
    if (got[j] == e) continue;
    mm = &r->first[r->nfirst++];
    mm->i = j;
    if (got[j] == 0xFF) snprintf(mm->got, sizeof mm->got, "0xff(poison)");
    else snprintf(mm->got, sizeof mm->got, "0x%02x", got[j]);
    if (mode == 1) snprintf(mm->want, sizeof mm->want, "0xff(untouched)");
    else snprintf(mm->want, sizeof mm->want, "0x%02x", e);
  }
}

/* The driver's word-at-a-time comparison must agree with the harness's pattern before it judges
 * anyone (where the checks are made). */
static void self_test(const mgpu_ctx *ctx) {
  enum { kN = 4099 };
  static uint8_t b[kN];
  const uint64_t key = mgpu_rank_pattern_key(ctx->seed, ctx->rank, 7);
  counts c;
  long long i;
  for (i = 0; i < kN; i++) b[i] = mgpu_pattern_byte_k(key, i);
  c = compare_bytes(b, kN, key, 0, 0, 0);
  if (c.bad || c.unwritten)
    mgpu_fail("driver", "self test", __FILE__, __LINE__, (long)(c.bad + c.unwritten),
              "the driver's byte comparison disagrees with mgpu_pattern_byte_k (a bug in the course)");
}

/* Host copies of recv and send: pinned in the rank, which reads them back from the GPU; plain
 * memory in the verifier, where they arrive. */
typedef struct host_bufs {
  uint8_t *recv, *send;
} host_bufs;

static void host_alloc(const mgpu_ctx *ctx, host_bufs *h, size_t n) {
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMallocHost((void **)&h->recv, n));
    MGPU_CUDA(cudaMallocHost((void **)&h->send, n));
  } else {
    h->recv = (uint8_t *)malloc(n);
    h->send = (uint8_t *)malloc(n);
    if (!h->recv || !h->send) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  }
}

static void host_free(const mgpu_ctx *ctx, host_bufs *h) {
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFreeHost(h->send));
    MGPU_CUDA(cudaFreeHost(h->recv));
  } else {
    free(h->send);
    free(h->recv);
  }
}

/* ---- MPI ----------------------------------------------------------------------------------- */

static int partner_of(int rank, int world) {
  const int p = rank ^ 1;
  return p < world ? p : -1;
}

/* 1: the MPI that runs us takes device pointers; 0: it does not; -1: it cannot say. */
static int mpi_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support();
#else
  return -1;
#endif
}

static void start_mpi(mgpu_ctx *ctx, int *argc, char ***argv, MPI_Comm *learner) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING + 1], msg[600], *nl;
  int rank, world, len = 0, aware;
  MGPU_MPI(MPI_Init(argc, argv));
  mgpu_mpi_errors_return();
  MGPU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MGPU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world));
  if (rank != ctx->rank || world != ctx->world) {
    snprintf(msg, sizeof msg, "MPI says rank %d of %d, the launcher's environment %d of %d", rank,
             world, ctx->rank, ctx->world);
    mgpu_fail("harness", "MPI_Comm_rank", __FILE__, __LINE__, rank, msg);
  }
  MGPU_MPI(MPI_Get_library_version(version, &len));
  version[len < 0 ? 0 : len > MPI_MAX_LIBRARY_VERSION_STRING ? MPI_MAX_LIBRARY_VERSION_STRING : len] = 0;
  if ((nl = strchr(version, '\n')) != NULL) *nl = 0;
  if ((nl = strchr(version, ',')) != NULL) *nl = 0;
  aware = mpi_cuda_aware();
  if (aware == 0) {
    snprintf(msg, sizeof msg,
             "%s is not CUDA-aware: MPIX_Query_cuda_support() returned 0, so a device pointer "
             "passed to MPI_Send would crash it. Nothing was run. Use a CUDA-aware MPI "
             "(`mgpu-learn doctor` shows which MPI the course found)",
             version);
    mgpu_fail("harness", "MPIX_Query_cuda_support", __FILE__, __LINE__, 0, msg);
  }
  if (ctx->rank == 0)
    mgpu_note("MPI: %s; MPIX_Query_cuda_support() = %s", version,
              aware == 1 ? "1 (CUDA-aware)" : "not available (this MPI cannot say; assumed aware)");
  MGPU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, learner));
  MGPU_MPI(MPI_Comm_set_errhandler(*learner, MPI_ERRORS_RETURN));
}

static double max_over_ranks(double v) {
  double out = v;
  MGPU_MPI(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

/* ---- correctness --------------------------------------------------------------------------- */

typedef struct tally {
  mgpu_result r;
  long long stale, own, send_changed, idle_touched, stats_bad;
  char stats_why[200];
} tally;

/* What the rank saw of the learner's call: the figures it returned and how long it took. */
typedef struct round_facts {
  double one_way_us, gbps, call_us;
} round_facts;

/* One round with fresh data. The rank runs it and hands recv, send and the round's facts over
 * (tags "<tag>/recv", "<tag>/send", "<tag>/stats"); where the checks are made, they go into t. */
static void one_round(mgpu_ctx *ctx, const char *tag, int c, int round, mgpu_buf *send,
                      mgpu_buf *recv, host_bufs *h, size_t n, int reps, MPI_Comm comm,
                      cudaStream_t s, tally *t) {
  const int partner = partner_of(ctx->rank, ctx->world);
  round_facts f = {0, 0, 0};
  char ht[160];
  counts k;
  (void)comm; /* the learner's, in the rank only */

  if (mgpu_computes(ctx)) {
    pp_stats st = {0, 0};
    double t0;
    mgpu_poison(recv, s);
    mgpu_fill_rank_pattern(send->ptr, n, ctx->seed, ctx->rank, stale_iter(c, round), s);
    MGPU_CUDA(cudaStreamSynchronize(s));
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
    mgpu_fill_rank_pattern(send->ptr, n, ctx->seed, ctx->rank, fresh_iter(c, round), s);
    t0 = mgpu_now_us();
    MGPU_LEARNER(st = pingpong(send->ptr, recv->ptr, n, reps, s, comm));
    f.call_us = mgpu_now_us() - t0;
    f.one_way_us = st.one_way_us;
    f.gbps = st.gbps;
    MGPU_CUDA(cudaStreamSynchronize(s));
    MGPU_CUDA(cudaMemcpyAsync(h->recv, recv->ptr, n, cudaMemcpyDeviceToHost, s));
    MGPU_CUDA(cudaMemcpyAsync(h->send, send->ptr, n, cudaMemcpyDeviceToHost, s));
    MGPU_CUDA(cudaStreamSynchronize(s));
  }
  snprintf(ht, sizeof ht, "%s/recv", tag);
  mgpu_hand_over(ctx, ht, h->recv, n);
  snprintf(ht, sizeof ht, "%s/send", tag);
  mgpu_hand_over(ctx, ht, h->send, n);
  snprintf(ht, sizeof ht, "%s/stats", tag);
  if (!mgpu_hand_over(ctx, ht, &f, sizeof f)) return;

  {
    const uint64_t mine = mgpu_rank_pattern_key(ctx->seed, ctx->rank, fresh_iter(c, round));
    if (partner < 0) {
      k = compare_bytes(h->recv, (long long)n, 0, 0, 0, 1);
      t->r.checked += (long long)n;
      if (k.bad) {
        t->idle_touched += k.bad;
        t->r.bad += k.bad;
        if (t->r.nfirst == 0) first_mismatches(h->recv, (long long)n, 0, 1, &t->r);
      }
    } else {
      const uint64_t want = mgpu_rank_pattern_key(ctx->seed, partner, fresh_iter(c, round));
      k = compare_bytes(h->recv, (long long)n, want,
                        mgpu_rank_pattern_key(ctx->seed, partner, stale_iter(c, round)), mine, 0);
      t->r.checked += (long long)n;
      t->r.bad += k.bad;
      t->r.unwritten += k.unwritten;
      t->stale += k.stale;
      t->own += k.own;
      if ((k.bad || k.unwritten) && t->r.nfirst == 0)
        first_mismatches(h->recv, (long long)n, want, 0, &t->r);

      /* The learner's figures. */
      if (!t->stats_bad) {
        const double implied = f.one_way_us > 0 ? (double)n / (f.one_way_us * 1e3) : 0;
        if (!(isfinite(f.one_way_us) && f.one_way_us > 0 && isfinite(f.gbps) && f.gbps > 0)) {
          t->stats_bad = 1;
          snprintf(t->stats_why, sizeof t->stats_why,
                   "pingpong returned one_way_us = %g and gbps = %g: both must be positive",
                   f.one_way_us, f.gbps);
        } else if (fabs(f.gbps - implied) > 0.02 * implied) {
          t->stats_bad = 1;
          snprintf(t->stats_why, sizeof t->stats_why,
                   "pingpong returned gbps = %g, but %zu bytes in one_way_us = %g us is %g GB/s",
                   f.gbps, n, f.one_way_us, implied);
        } else if (2.0 * reps * f.one_way_us > 1.05 * f.call_us + 50.0) {
          t->stats_bad = 1;
          snprintf(t->stats_why, sizeof t->stats_why,
                   "pingpong returned one_way_us = %g for %d round trips, %g us in all, but the "
                   "whole call took %.0f us: a round trip is two one-way trips",
                   f.one_way_us, reps, 2.0 * reps * f.one_way_us, f.call_us);
        }
      }
    }
    k = compare_bytes(h->send, (long long)n, mine, 0, 0, 0);
    t->send_changed += k.bad + k.unwritten;
  }
}

/* The guard count goes over from the rank ("<name>/guards"); where the checks are made, the
 * case is recorded. */
static void record(mgpu_ctx *ctx, const char *name, tally *t, int rounds, const mgpu_buf *send,
                   const mgpu_buf *recv) {
  const int partner = partner_of(ctx->rank, ctx->world);
  mgpu_result *r = &t->r;
  long long hits = 0, wrong;
  char ht[160];
  int force = 0;
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(send) + mgpu_guard_hits(recv);
  snprintf(ht, sizeof ht, "%s/guards", name);
  if (!mgpu_hand_over(ctx, ht, &hits, sizeof hits)) return;
  r->guard_hits = hits;
  wrong = r->bad + r->unwritten;
  if (partner < 0 && t->idle_touched)
    snprintf(r->msg, sizeof r->msg,
             "rank %d is the last of an odd number of ranks (%d) and has no partner, so its recv "
             "must stay untouched, but %lld bytes of it changed: some rank sent to it. Partners "
             "are (0, 1), (2, 3), ...",
             ctx->rank, ctx->world, t->idle_touched);
  else if (wrong && t->stale * 2 >= wrong)
    snprintf(r->msg, sizeof r->msg,
             "%lld of the %lld wrong bytes in recv are what rank %d's send held BEFORE the "
             "driver's fill kernel ran (it was queued on `stream` behind a 20 ms delay): MPI read "
             "send before the work on the stream had finished. MPI knows nothing about CUDA "
             "streams: finish the stream (cudaStreamSynchronize) before handing send to MPI",
             t->stale, wrong, partner);
  else if (wrong && strncmp(name, "timed-", 6) == 0)
    snprintf(r->msg, sizeof r->msg,
             "after the timed calls, a round with new data in the same buffers gave a wrong "
             "result (%lld bytes differ, %lld never written): every call must do the whole "
             "work, repeated calls with the same buffers included",
             r->bad, r->unwritten);
  else if (wrong && r->unwritten == wrong && r->unwritten >= r->checked / rounds)
    snprintf(r->msg, sizeof r->msg,
             "recv was never written (it still holds the driver's 0xFF poison): the bytes this "
             "rank's partner, rank %d, sent did not arrive in recv. Did they go to another buffer, "
             "a host copy that was never copied back, or to another rank?",
             partner);
  else if (wrong && t->own * 2 >= wrong)
    snprintf(r->msg, sizeof r->msg,
             "%lld of the %lld wrong bytes in recv are this rank's own bytes: rank %d sent back "
             "what it had received instead of the contents of its own send",
             t->own, wrong, partner);
  else if (wrong)
    snprintf(r->msg, sizeof r->msg,
             "recv must hold the bytes rank %d sent (a pattern that depends on the sender's rank "
             "and changes every round); %lld bytes differ and %lld were never written, over %d "
             "rounds. Index = byte offset in recv. Partners are (0, 1), (2, 3), ...: is the "
             "partner right for %d ranks?",
             partner, r->bad, r->unwritten, rounds, ctx->world);
  else if (t->send_changed) {
    force = 1;
    snprintf(r->msg, sizeof r->msg,
             "send was modified (%lld bytes differ from what the driver wrote): it is input only",
             t->send_changed);
  } else if (r->guard_hits)
    snprintf(r->msg, sizeof r->msg, "a write landed outside send or recv (in the guard bands)");
  else if (t->stats_bad) {
    force = 1;
    snprintf(r->msg, sizeof r->msg, "the bytes are right, but the figures are not: %s", t->stats_why);
  }
  mgpu_record_case(name, r, force);
}

static void run_case(mgpu_ctx *ctx, int c, MPI_Comm comm, cudaStream_t s) {
  const long long n = ctx->cases[c].n;
  mgpu_buf send, recv;
  host_bufs h;
  tally t;
  char tag[160];
  int round;
  if (n < 1 || (size_t)n > kMaxBytes)
    mgpu_fail("driver", "case", __FILE__, __LINE__, n, "case size out of range (1 B .. 1 GiB)");
  memset(&send, 0, sizeof send);
  memset(&recv, 0, sizeof recv);
  if (mgpu_computes(ctx)) {
    send = mgpu_alloc((size_t)n, ctx->device);
    recv = mgpu_alloc((size_t)n, ctx->device);
  }
  host_alloc(ctx, &h, (size_t)n);
  memset(&t, 0, sizeof t);
  mgpu_result_init(&t.r, n);
  for (round = 0; round < kRounds; round++) {
    snprintf(tag, sizeof tag, "%s/%d", ctx->cases[c].name, round);
    one_round(ctx, tag, c, round, &send, &recv, &h, (size_t)n, kCheckReps, comm, s, &t);
  }
  t.r.n = n;
  record(ctx, ctx->cases[c].name, &t, kRounds, &send, &recv);
  host_free(ctx, &h);
  if (mgpu_computes(ctx)) {
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    mgpu_free(&recv);
    mgpu_free(&send);
  }
}

/* ---- performance --------------------------------------------------------------------------- */

typedef struct ipc_share {
  cudaIpcMemHandle_t send, recv;
} ipc_share;

typedef struct baseline {
  void *send, *recv;  /* this rank's baseline buffers (cudaMalloc: IPC exports allocations) */
  void *peer_send, *peer_recv; /* the partner's, opened here (even rank of a pair only) */
  int my_dev, peer_dev;
} baseline;

static int ptr_device(const void *p) {
  cudaPointerAttributes a;
  MGPU_CUDA(cudaPointerGetAttributes(&a, p));
  return a.device;
}

/* Every rank allocates its baseline buffers and publishes their IPC handles; the even rank of
 * each pair opens its partner's. Collective. */
static void baseline_open(mgpu_ctx *ctx, size_t n, cudaStream_t s, baseline *b) {
  const int partner = partner_of(ctx->rank, ctx->world);
  ipc_share mine, theirs;
  int r;
  memset(b, 0, sizeof *b);
  memset(&mine, 0, sizeof mine);
  memset(&theirs, 0, sizeof theirs);
  MGPU_CUDA(cudaMalloc(&b->send, n));
  MGPU_CUDA(cudaMalloc(&b->recv, n));
  mgpu_fill_rank_pattern(b->send, n, ctx->seed, ctx->rank, 2000, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_CUDA(cudaIpcGetMemHandle(&mine.send, b->send));
  MGPU_CUDA(cudaIpcGetMemHandle(&mine.recv, b->recv));
  for (r = 0; r < ctx->world; r++) {
    ipc_share got = mine;
    mgpu_share(ctx, "pp-ipc", &got, sizeof got, r);
    if (r == partner) theirs = got;
  }
  if (partner < 0 || ctx->rank % 2 == 1) return;
  MGPU_CUDA(cudaIpcOpenMemHandle(&b->peer_send, theirs.send, cudaIpcMemLazyEnablePeerAccess));
  MGPU_CUDA(cudaIpcOpenMemHandle(&b->peer_recv, theirs.recv, cudaIpcMemLazyEnablePeerAccess));
  b->my_dev = ctx->device;
  b->peer_dev = ptr_device(b->peer_recv);
}

/* Collective: the partner's mappings go before anyone frees what they map. */
static void baseline_close(baseline *b) {
  if (b->peer_send) MGPU_CUDA(cudaIpcCloseMemHandle(b->peer_send));
  if (b->peer_recv) MGPU_CUDA(cudaIpcCloseMemHandle(b->peer_recv));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  MGPU_CUDA(cudaFree(b->recv));
  MGPU_CUDA(cudaFree(b->send));
}

/* The baseline's round trip: the copy engine moves this rank's send -> the partner's recv,
 * then the partner's send -> this rank's recv, on the even rank's stream. The odd rank and a
 * rank alone do nothing. */
static void baseline_round(const baseline *b, size_t n, cudaStream_t s) {
  if (!b->peer_recv) return;
  MGPU_CUDA(cudaMemcpyPeerAsync(b->peer_recv, b->peer_dev, b->send, b->my_dev, n, s));
  MGPU_CUDA(cudaMemcpyPeerAsync(b->recv, b->my_dev, b->peer_send, b->peer_dev, n, s));
}

/* The baseline's buffers, opened once before any device buffer goes through MPI: Open MPI's
 * smcuda caches IPC mappings of the buffers it moves, and a cudaMalloc made later can land
 * on an allocation it still maps, which cudaIpcOpenMemHandle then refuses (AlreadyMapped,
 * seen on an H100 with both ranks on one GPU). */
static baseline g_base;

/* The case "timed-<perf case>": one more round with fresh data in the timed buffers, recv
 * poisoned first, checked like a correctness round. The verifier takes only this part. */
static void check_after_timing(mgpu_ctx *ctx, int pc, mgpu_buf *send, mgpu_buf *recv, size_t n,
                               MPI_Comm comm, cudaStream_t s) {
  host_bufs h;
  tally t;
  char name[96], tag[160];
  snprintf(name, sizeof name, "timed-%s", ctx->perf_cases[pc].name);
  snprintf(tag, sizeof tag, "%s/0", name);
  host_alloc(ctx, &h, n);
  memset(&t, 0, sizeof t);
  mgpu_result_init(&t.r, (long long)n);
  if (mgpu_computes(ctx)) MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  one_round(ctx, tag, 40 + pc, 0, send, recv, &h, n, 1, comm, s, &t);
  record(ctx, name, &t, 1, send, recv);
  host_free(ctx, &h);
}

static void run_perf(mgpu_ctx *ctx, int pc, int ncases, MPI_Comm comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->perf_cases[pc];
  const size_t n = (size_t)c->n;
  const int min_reps = ctx->min_reps > 0 ? ctx->min_reps : 5;
  int max_reps = ctx->max_reps > 0 ? ctx->max_reps : 30;
  const double budget_us = (ctx->perf_budget_ms > 0 ? ctx->perf_budget_ms : 20000.0) * 1e3 / ncases;
  double yours_us[kMaxSamples], base_us[kMaxSamples], base_wall[kMaxSamples];
  mgpu_buf send, recv;
  const baseline b = g_base;
  cudaEvent_t e0, e1;
  pp_stats st = {0, 0};
  double t0, one, start;
  int iters, i, k, stop;
  char name[96];

  if (c->n < 1 || n > kMaxBytes)
    mgpu_fail("driver", "perf case", __FILE__, __LINE__, c->n, "perf case size out of range");
  if (!mgpu_computes(ctx)) { /* the verifier: the check after the timing only */
    memset(&send, 0, sizeof send);
    memset(&recv, 0, sizeof recv);
    check_after_timing(ctx, pc, &send, &recv, n, comm, s);
    return;
  }
  if (max_reps > kMaxSamples) max_reps = kMaxSamples;
  send = mgpu_alloc(n, ctx->device);
  recv = mgpu_alloc(n, ctx->device);
  mgpu_fill_rank_pattern(send.ptr, n, ctx->seed, ctx->rank, 1000 + pc, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_CUDA(cudaEventCreate(&e0));
  MGPU_CUDA(cudaEventCreate(&e1));

  /* Warm-up (MPI's IPC handle cache, peer mappings), then one timed call of each decides how
   * many operations a sample takes: the slower side lasts at least kSampleUs. */
  for (i = 0; i < 2; i++) {
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MGPU_LEARNER(pingpong(send.ptr, recv.ptr, n, 1, s, comm));
    baseline_round(&b, n, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
  }
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  t0 = mgpu_now_us();
  MGPU_LEARNER(pingpong(send.ptr, recv.ptr, n, 1, s, comm));
  one = max_over_ranks(mgpu_now_us() - t0);
  iters = (int)ceil(kSampleUs / (one > 1 ? one : 1));
  if (iters < 1) iters = 1;
  if (iters > 2000) iters = 2000;

  start = mgpu_now_us();
  for (k = 0, stop = 0; !stop; k++) {
    float ms = 0;
    double us;
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    t0 = mgpu_now_us();
    MGPU_LEARNER(st = pingpong(send.ptr, recv.ptr, n, iters, s, comm));
    us = (mgpu_now_us() - t0) / iters;
    yours_us[k] = max_over_ranks(us);

    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    t0 = mgpu_now_us();
    MGPU_CUDA(cudaEventRecord(e0, s));
    for (i = 0; i < iters; i++) baseline_round(&b, n, s);
    MGPU_CUDA(cudaEventRecord(e1, s));
    MGPU_CUDA(cudaStreamSynchronize(s));
    us = (mgpu_now_us() - t0) / iters;
    MGPU_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    base_wall[k] = max_over_ranks(b.peer_recv ? us : 0.0);
    base_us[k] = max_over_ranks(b.peer_recv ? ms * 1e3 / iters : 0.0);

    stop = k + 1 >= max_reps || (k + 1 >= min_reps && mgpu_now_us() - start > budget_us);
    MGPU_MPI(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD));
  }
  mgpu_record_timing(c->name, "yours", 2.0 * (double)n, 1.0, "algbw", yours_us, yours_us, k);
  mgpu_record_timing(c->name, "baseline", 2.0 * (double)n, 1.0, "algbw", base_us, base_wall, k);
  if (ctx->rank == 0 && partner_of(0, ctx->world) >= 0) {
    snprintf(name, sizeof name, "your one-way latency, %s", c->name);
    mgpu_value(name, st.one_way_us, "us");
    snprintf(name, sizeof name, "your bandwidth, %s", c->name);
    mgpu_value(name, st.gbps, "GB/s");
  }

  /* What was timed must still be a ping-pong: one more round with fresh data. */
  check_after_timing(ctx, pc, &send, &recv, n, comm, s);

  MGPU_CUDA(cudaEventDestroy(e1));
  MGPU_CUDA(cudaEventDestroy(e0));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  mgpu_free(&recv);
  mgpu_free(&send);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  MPI_Comm comm = MPI_COMM_NULL;
  cudaStream_t stream = NULL;
  int k;

  mgpu_init(&ctx, argc, argv); /* picks this rank's GPU before MPI_Init (none in the verifier) */
  if (mgpu_computes(&ctx)) start_mpi(&ctx, &argc, &argv, &comm);
  if (ctx.world < 2)
    mgpu_fail("driver", "ranks", __FILE__, __LINE__, ctx.world,
              "a ping-pong needs at least 2 ranks (one per GPU); this run has 1");
  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (ctx.perf) {
      size_t most = 1;
      for (k = 0; k < ctx.nperf_cases; k++)
        if (ctx.perf_cases[k].n > 0 && (size_t)ctx.perf_cases[k].n <= kMaxBytes &&
            (size_t)ctx.perf_cases[k].n > most)
          most = (size_t)ctx.perf_cases[k].n;
      baseline_open(&ctx, most, stream, &g_base);
    }
  }
  if (mgpu_verifies(&ctx)) self_test(&ctx);

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, k, comm, stream);
  if (ctx.perf) {
    for (k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, k, ctx.nperf_cases, comm, stream);
    if (mgpu_computes(&ctx)) {
      MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
      baseline_close(&g_base);
    }
  }

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamDestroy(stream));
    MGPU_MPI(MPI_Comm_free(&comm));
    MGPU_MPI(MPI_Finalize());
  }
  return mgpu_finish(&ctx);
}
