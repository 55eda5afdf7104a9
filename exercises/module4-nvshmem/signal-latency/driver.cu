/*
 * driver.cu — module4/signal-latency (course-owned).
 *
 * One process per GPU, each one NVSHMEM PE (mgpu_nvshmem_init), plus an NCCL communicator over
 * the same processes for the baseline. Pairs (2i, 2i+1); the last PE of an odd count is idle.
 *
 * Setup: pingpong_setup (yours) once; every PE checks that inbox and signal lie in NVSHMEM's
 * symmetric heap (nvshmem_ptr) and the PEs agree on the outcome before anything is sent.
 *
 * Correctness, per case (n = message bytes; rounds = 32 MiB / n, clamped to 32..256), three
 * calls with fresh keys (a function of the run's seed, the case, the call and the PE):
 *   call 0: both PEs of a pair start together;
 *   call 1: the initiators start 5 ms late (a driver kernel sleeps on their stream first), so a
 *           responder that does not really wait reads an inbox that is not there yet;
 *   call 2: the responders start 5 ms late, so the first ping lands before the responder's
 *           kernel starts: a signal reset at kernel start loses it (and hangs).
 * The driver poisons `received`, fills the keys, calls pingpong_run and reads `received` back
 * right behind it on the same stream, then recomputes the whole chain of messages on the host
 * from both PEs' keys and compares every byte of every round. Because each message is the
 * previous one mixed with a fresh key, a message computed from one that had not landed (no
 * wait, a wait satisfied by an old signal, a signal that overtook its data) or from an earlier
 * call's data corrupts that round and every later one. The idle PE's `received` must stay
 * untouched. A call that has not finished after 20 s (a wait for a signal that never comes) is
 * reported as such instead of hanging until the check's timeout.
 *
 * Performance (metric "time"): the same exchange of kPerfRounds round trips, yours against
 * NCCL ping-pong on the same buffers (initiator: ncclSend then ncclRecv per round; responder:
 * ncclRecv then ncclSend of what it received), in the same run, ABAB. Each timed operation is
 * kPerfRounds round trips, so the ratio of the two times is the ratio of one-way latencies.
 * NCCL receives into a buffer of its own, so that after timing `received` holds what your last
 * timed call received.
 * After timing ("after-timing", not in MGPU_CASES): the keys did not change during timing, so
 * `received` must hold the chain of the timed keys; then new keys (no call used them) go into
 * the same keys buffer, `received` is poisoned and pingpong_run runs once more exactly as the
 * timed calls ran it; every byte of both is compared with the chain recomputed on the host.
 *
 * The comparisons are each PE's verifier's (`verifier: true`, docs/protocol.md §4): the PE hands
 * over what it found of pingpong_setup, every call's `received` and its guard counts. Keys are
 * each PE's own byte pattern, so a PE can make its own keys but not its partner's, and the
 * chain only on the CPU of its verifier. Timing and the kernel's own clock stay with the PE.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#include "signal-latency.h"

/* kPerfRounds: 50 round trips are 200 NCCL calls per baseline operation, all queued behind the
 * timing gate before it opens; many more could fill the launch queue and block the host. */
enum { kIterations = 3, kPerfRounds = 50, kWatchdogS = 20 };
static const long long kLateNs = 5LL * 1000 * 1000;
static const size_t kChainBytes = (size_t)32 << 20; /* bytes per call in the correctness cases */

static int rounds_for(size_t bytes) {
  size_t r = kChainBytes / (bytes ? bytes : 1);
  if (r < 32) r = 32;
  if (r > 256) r = 256;
  return (int)r;
}

/* The keys' pattern iteration, distinct for every (case, call); the perf keys apart. Keys are
 * each PE's own pattern of it (mgpu_rank_pattern_key), so the PE is in the key. */
static int key_iter(int case_index, int call) { return case_index * 8 + call; }
static const int kPerfKeyIter = 1 << 24;
static const int kAfterKeyIter = (1 << 24) + 1;

/* Waits for `stream` with a deadline; a call that never finishes is the learner's hang. */
static void finish_or_fail(cudaStream_t stream, const mgpu_ctx *ctx, const char *what) {
  mgpu_wait_or_hang(ctx, stream, kWatchdogS, what,
                    "a wait for a signal that never comes. Is the message sent to the right PE "
                    "(pairs 2i and 2i+1)? Is the value waited for one the partner actually "
                    "writes? Was a signal reset after the partner had already set it?");
}

/* ---- setup check ------------------------------------------------------------------------- */

enum { kSetupOK = 0, kInboxNull, kInboxNotSymmetric, kInboxSmall, kSignalNull, kSignalNotSymmetric };

static int judge_setup(const pingpong *pp, size_t max_bytes, int me) {
  if (!pp->inbox) return kInboxNull;
  if (!nvshmem_ptr(pp->inbox, me)) return kInboxNotSymmetric;
  if (pp->inbox_bytes < max_bytes ||
      !nvshmem_ptr((const char *)pp->inbox + max_bytes - 1, me))
    return kInboxSmall;
  if (!pp->signal) return kSignalNull;
  if (!nvshmem_ptr(pp->signal, me)) return kSignalNotSymmetric;
  return kSetupOK;
}

/* Every PE learns every PE's verdict; returns the first bad PE (and its verdict) or -1. */
static int agree_setup(mgpu_ctx *ctx, int mine, int *what) {
  int bad = -1;
  for (int r = 0; r < ctx->world; r++) {
    char key[64];
    int v = r == ctx->rank ? mine : 0;
    snprintf(key, sizeof key, "pingpong-setup-%d", r);
    mgpu_share(ctx, key, &v, sizeof v, r);
    if (v != kSetupOK && bad < 0) {
      bad = r;
      *what = v;
    }
  }
  return bad;
}

/* The verifier (or a program run without one) records why no case could run. */
static void setup_failed(const mgpu_ctx *ctx, const mgpu_case *c, int bad_pe, int what,
                         size_t max_bytes) {
  if (!mgpu_verifies(ctx)) return;
  mgpu_result r;
  mgpu_result_init(&r, c->n);
  r.checked = r.unwritten = c->n;
  const char *why;
  switch (what) {
  case kInboxNull: why = "left inbox NULL"; break;
  case kInboxNotSymmetric: why = "set inbox to memory outside NVSHMEM's symmetric heap"; break;
  case kInboxSmall: why = "gave an inbox smaller than max_bytes"; break;
  case kSignalNull: why = "left signal NULL"; break;
  default: why = "set signal to memory outside NVSHMEM's symmetric heap"; break;
  }
  snprintf(r.msg, sizeof r.msg,
           "pingpong_setup on PE %d %s (max_bytes %zu); nothing was sent. A put or a signal "
           "can only target memory the partner can address: allocate inbox and signal in the "
           "symmetric heap (nvshmem_malloc / nvshmem_calloc), on every PE, same sizes, same "
           "order; cudaMalloc'd memory has no address on the other GPU",
           bad_pe, why, max_bytes);
  mgpu_record_case(c->name, &r, 1);
}

/* ---- correctness ------------------------------------------------------------------------- */

static double byte_got(uint8_t got, uint8_t want) {
  /* A byte still holding the poison where something else was due counts as unwritten: hand
   * mgpu_result_add the harness's poison (all-ones float NaN). */
  if (got == 0xFF && want != 0xFF) {
    float poison;
    memset(&poison, 0xFF, sizeof poison);
    return (double)poison;
  }
  return (double)got;
}

typedef struct call_report {
  long long bad_bytes;    /* bytes of this call that differ */
  int first_round;        /* first round with a difference, -1 when none */
  int first_is_previous;  /* that round's bytes equal the previous message of the chain */
  int all_poison;         /* received was never written */
} call_report;

/* Recomputes the call's chain (the pair's keys of pattern iteration `iter`: the initiator's and
 * the responder's own) and compares this PE's received messages with it. Only where the check
 * is made: a PE checked by a verifier cannot make its partner's keys. */
static call_report check_call(const mgpu_ctx *ctx, mgpu_result *res, long long offset,
                              const uint8_t *got, size_t bytes, int rounds, int iter) {
  const int me = ctx->rank, a = me & ~1, initiator = me == a;
  const uint64_t ka = mgpu_rank_pattern_key(ctx->seed, a, iter);
  const uint64_t kb = mgpu_rank_pattern_key(ctx->seed, a | 1, iter);
  uint8_t *msg = (uint8_t *)calloc(bytes, 1), *prev = (uint8_t *)calloc(bytes, 1);
  if (!msg || !prev) mgpu_fail("driver", "calloc", __FILE__, __LINE__, 0, "out of host memory");
  call_report rep = {0, -1, 0, 1};
  for (int r = 0; r < rounds; r++) {
    const size_t at = (size_t)r * bytes;
    long long bad_here = 0;
    int same_as_prev = r > 0;
    for (size_t i = 0; i < bytes; i++) {
      const uint8_t ping = msg[i] ^ mgpu_pattern_byte_k(ka, (long long)(at + i));
      const uint8_t pong = ping ^ mgpu_pattern_byte_k(kb, (long long)(at + i));
      const uint8_t want = initiator ? pong : ping;
      const uint8_t g = got[at + i];
      if (g != 0xFF) rep.all_poison = 0;
      mgpu_result_add(res, offset + (long long)(at + i), byte_got(g, want), (double)want, 0.0);
      if (g != want) bad_here++;
      if (g != prev[i]) same_as_prev = 0;
      prev[i] = want;
      msg[i] = pong;
    }
    if (bad_here && rep.first_round < 0) {
      rep.first_round = r;
      rep.first_is_previous = same_as_prev;
    }
    rep.bad_bytes += bad_here;
  }
  free(prev);
  free(msg);
  return rep;
}

/* Guard bytes hit around received and keys: counted by the rank, handed over. */
static long long guard_hits_of(mgpu_ctx *ctx, const char *tag, const mgpu_buf *received,
                               const mgpu_buf *keys) {
  long long hits = 0;
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(received) + mgpu_guard_hits(keys);
  mgpu_hand_over(ctx, tag, &hits, sizeof hits);
  return hits;
}

static void call_run(pingpong *pp, const mgpu_buf *keys, const mgpu_buf *received, size_t bytes,
                     int rounds, unsigned long long *elapsed, cudaStream_t stream) {
  MGPU_LEARNER(pingpong_run(pp, (const uint8_t *)keys->ptr, (uint8_t *)received->ptr, bytes,
                            rounds, elapsed, stream));
}

static void run_case(mgpu_ctx *ctx, pingpong *pp, int case_index, cudaStream_t stream) {
  const mgpu_case *c = &ctx->cases[case_index];
  const int me = ctx->rank, partner = me ^ 1, idle = partner >= ctx->world;
  if (c->n < 1 || c->n > (64LL << 20)) {
    if (mgpu_verifies(ctx)) {
      mgpu_result r;
      mgpu_result_init(&r, 0);
      snprintf(r.msg, sizeof r.msg, "case %s: n must be a message size in bytes, 1..64 MiB",
               c->name);
      mgpu_record_case(c->name, &r, 1);
    }
    return;
  }
  const size_t bytes = (size_t)c->n;
  const int rounds = rounds_for(bytes);
  const size_t total = bytes * (size_t)rounds;
  char tag[128];

  mgpu_buf keys, received;
  memset(&keys, 0, sizeof keys);
  memset(&received, 0, sizeof received);
  unsigned long long *elapsed = NULL;
  if (mgpu_computes(ctx)) {
    keys = mgpu_alloc(total, ctx->device);
    received = mgpu_alloc(total, ctx->device);
    MGPU_CUDA(cudaMalloc((void **)&elapsed, sizeof *elapsed));
  }
  uint8_t *host = (uint8_t *)mgpu_host_alloc(ctx, total);

  mgpu_result res;
  mgpu_result_init(&res, (long long)total * kIterations);
  long long written_while_idle = 0, guard_hits = 0;
  call_report first = {0, -1, 0, 0};
  int first_call = -1, poison_calls = 0;
  for (int call = 0; call < kIterations; call++) {
    if (mgpu_computes(ctx)) {
      mgpu_poison(&received, stream);
      mgpu_fill_rank_pattern(keys.ptr, total, ctx->seed, me, key_iter(case_index, call), stream);
      MGPU_CUDA(cudaMemsetAsync(elapsed, 0, sizeof *elapsed, stream));
      const int late = (call == 1 && (me & 1) == 0) || (call == 2 && (me & 1) == 1);
      if (late && !idle) mgpu_delay(stream, kLateNs);
      call_run(pp, &keys, &received, bytes, rounds, elapsed, stream);
      MGPU_CUDA(cudaMemcpyAsync(host, received.ptr, total, cudaMemcpyDeviceToHost, stream));
      finish_or_fail(stream, ctx, "pingpong_run");
    }

    snprintf(tag, sizeof tag, "%s/%d/received", c->name, call);
    if (mgpu_hand_over(ctx, tag, host, total)) {
      const long long offset = (long long)total * call;
      if (idle) {
        for (size_t i = 0; i < total; i++) {
          mgpu_result_add(&res, offset + (long long)i,
                          host[i] == 0xFF ? 255.0 : (double)host[i], 255.0, 0.0);
          written_while_idle += host[i] != 0xFF;
        }
      } else {
        call_report rep = check_call(ctx, &res, offset, host, bytes, rounds,
                                     key_iter(case_index, call));
        poison_calls += rep.all_poison;
        if (rep.first_round >= 0 && first_call < 0) {
          first_call = call;
          first = rep;
        }
      }
    }
    snprintf(tag, sizeof tag, "%s/%d/guards", c->name, call);
    guard_hits += guard_hits_of(ctx, tag, &received, &keys);
  }
  res.guard_hits = guard_hits;

  if (mgpu_verifies(ctx)) {
    const char *role = (me & 1) ? "responder" : "initiator";
    if (idle && written_while_idle) {
      snprintf(res.msg, sizeof res.msg,
               "PE %d has no partner (%d PEs: pairs are 2i and 2i+1, the last PE of an odd "
               "count sits out), yet %lld bytes of its received buffer were written: its calls "
               "must do nothing",
               me, ctx->world, written_while_idle);
    } else if (!idle && poison_calls == kIterations) {
      snprintf(res.msg, sizeof res.msg,
               "PE %d (%s, partner PE %d) received nothing: its received buffer still held the "
               "poison after every call. Copy each message that lands in your inbox to "
               "received + r * bytes",
               me, role, partner);
    } else if (!idle && first_call >= 0) {
      const char *lateness = first_call == 1   ? "; in this call the initiators started 5 ms late"
                             : first_call == 2 ? "; in this call the responders started 5 ms late"
                                               : "";
      snprintf(res.msg, sizeof res.msg,
               "PE %d (%s, partner PE %d), call %d of %d, %zu-byte messages, %d rounds: the "
               "message received in round %d differs from what the chain should carry (%lld "
               "bytes of that call wrong%s%s). A message was read before it had fully landed "
               "(signal ahead of its data, no wait, a wait passed by an older signal) or built "
               "from one that had not",
               me, role, partner, first_call + 1, kIterations, bytes, rounds, first.first_round,
               first.bad_bytes,
               first.first_is_previous ? "; it still held the previous message" : "", lateness);
    } else if (guard_hits) {
      snprintf(res.msg, sizeof res.msg,
               "a write landed outside received or keys (%lld guard bytes changed): write "
               "rounds * bytes bytes of received and nothing else",
               guard_hits);
    }
    mgpu_record_case(c->name, &res, idle && written_while_idle);
  }

  mgpu_host_free(ctx, host);
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFree(elapsed));
    mgpu_free(&received);
    mgpu_free(&keys);
  }
}

/* ---- performance ------------------------------------------------------------------------- */

typedef struct timed {
  pingpong *pp;
  mgpu_buf keys, received;
  mgpu_buf nccl_received; /* the baseline's: received keeps what your last timed call got */
  size_t bytes;
  int rounds, partner, initiator;
  unsigned long long *elapsed;
  ncclComm_t comm;
} timed;

static void op_yours(void *arg, int iter, cudaStream_t stream) {
  timed *t = (timed *)arg;
  (void)iter;
  call_run(t->pp, &t->keys, &t->received, t->bytes, t->rounds, t->elapsed, stream);
}

/* NCCL ping-pong: one kernel per one-way message on each side. */
static void op_nccl(void *arg, int iter, cudaStream_t stream) {
  timed *t = (timed *)arg;
  (void)iter;
  if (t->partner < 0) return;
  for (int r = 0; r < t->rounds; r++) {
    uint8_t *in = (uint8_t *)t->nccl_received.ptr + (size_t)r * t->bytes;
    if (t->initiator) {
      MGPU_NCCL_OWN(ncclSend((const uint8_t *)t->keys.ptr + (size_t)r * t->bytes, t->bytes, ncclUint8,
                         t->partner, t->comm, stream));
      MGPU_NCCL_OWN(ncclRecv(in, t->bytes, ncclUint8, t->partner, t->comm, stream));
    } else {
      MGPU_NCCL_OWN(ncclRecv(in, t->bytes, ncclUint8, t->partner, t->comm, stream));
      MGPU_NCCL_OWN(ncclSend(in, t->bytes, ncclUint8, t->partner, t->comm, stream));
    }
  }
}

/* The case "after-timing": first what the last timed call left in received (its keys had not
 * changed), then one more call with new keys in the same buffers. Collective. A PE without a
 * partner must have written nothing. The PE hands over both and its guard count. */
static void check_after_timing(mgpu_ctx *ctx, timed *t, const char *perf_case,
                               cudaStream_t stream) {
  const int me = ctx->rank, idle = t->partner < 0;
  const size_t total = t->bytes * (size_t)t->rounds;
  uint8_t *host = (uint8_t *)mgpu_host_alloc(ctx, total);
  mgpu_result res;
  mgpu_result_init(&res, (idle ? 1 : 2) * (long long)total);
  call_report last = {0, -1, 0, 0}, fresh = {0, -1, 0, 0};
  long long written_while_idle = 0;
  char tag[128];

  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMemcpyAsync(host, t->received.ptr, total, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
  }
  snprintf(tag, sizeof tag, "after-timing/%s/last", perf_case);
  if (mgpu_hand_over(ctx, tag, host, total) && !idle)
    last = check_call(ctx, &res, 0, host, t->bytes, t->rounds, kPerfKeyIter);
  if (mgpu_computes(ctx)) {
    mgpu_poison(&t->received, stream);
    mgpu_fill_rank_pattern(t->keys.ptr, total, ctx->seed, me, kAfterKeyIter, stream);
    MGPU_CUDA(cudaMemsetAsync(t->elapsed, 0, sizeof *t->elapsed, stream));
    op_yours(t, 0, stream);
    MGPU_CUDA(cudaMemcpyAsync(host, t->received.ptr, total, cudaMemcpyDeviceToHost, stream));
    finish_or_fail(stream, ctx, "pingpong_run (after timing)");
  }
  snprintf(tag, sizeof tag, "after-timing/%s/new", perf_case);
  if (mgpu_hand_over(ctx, tag, host, total)) {
    if (idle)
      for (size_t i = 0; i < total; i++) {
        mgpu_result_add(&res, (long long)i, host[i], 255.0, 0.0);
        written_while_idle += host[i] != 0xFF;
      }
    else
      fresh = check_call(ctx, &res, (long long)total, host, t->bytes, t->rounds, kAfterKeyIter);
  }
  snprintf(tag, sizeof tag, "after-timing/%s/guards", perf_case);
  res.guard_hits = guard_hits_of(ctx, tag, &t->received, &t->keys);

  if (mgpu_verifies(ctx)) {
    if (written_while_idle)
      snprintf(res.msg, sizeof res.msg,
               "after the timed calls, PE %d (no partner) had %lld bytes of received written: "
               "its calls must do nothing",
               me, written_while_idle);
    else if (last.bad_bytes)
      snprintf(res.msg, sizeof res.msg,
               "after the timed calls, received did not hold the chain of the last timed call "
               "(its keys had not changed; %lld bytes wrong, from round %d of %d): every call "
               "must do the whole work, repeated calls with the same buffers included",
               last.bad_bytes, last.first_round, t->rounds);
    else if (fresh.bad_bytes)
      snprintf(res.msg, sizeof res.msg,
               "after the timed calls, a call with new data in the same buffers gave a wrong "
               "result: every call must do the whole work, repeated calls with the same buffers "
               "included (PE %d, %zu-byte messages, %d rounds: %lld bytes wrong from round %d "
               "on)",
               me, t->bytes, t->rounds, fresh.bad_bytes, fresh.first_round);
    else if (res.guard_hits)
      snprintf(res.msg, sizeof res.msg,
               "after the timed calls, a write landed outside received or keys (%lld guard bytes "
               "changed)",
               res.guard_hits);
    mgpu_record_case("after-timing", &res, written_while_idle != 0);
  }
  mgpu_host_free(ctx, host);
}

static void run_perf(mgpu_ctx *ctx, pingpong *pp, const mgpu_case *c, ncclComm_t comm,
                     cudaStream_t stream) {
  if (c->n < 1 || c->n > (64LL << 20)) {
    if (mgpu_computes(ctx))
      mgpu_note("perf case %s: n must be a message size in bytes, 1..64 MiB; skipped", c->name);
    return;
  }
  timed t;
  memset(&t, 0, sizeof t);
  t.pp = pp;
  t.bytes = (size_t)c->n;
  t.rounds = kPerfRounds;
  t.partner = (ctx->rank ^ 1) < ctx->world ? ctx->rank ^ 1 : -1;
  t.initiator = (ctx->rank & 1) == 0;
  t.comm = comm;
  const size_t total = t.bytes * (size_t)t.rounds;
  if (mgpu_computes(ctx)) {
    t.keys = mgpu_alloc(total, ctx->device);
    t.received = mgpu_alloc(total, ctx->device);
    t.nccl_received = mgpu_alloc(total, ctx->device);
    MGPU_CUDA(cudaMalloc((void **)&t.elapsed, sizeof *t.elapsed));
    MGPU_CUDA(cudaMemsetAsync(t.elapsed, 0, sizeof *t.elapsed, stream));
    mgpu_fill_rank_pattern(t.keys.ptr, total, ctx->seed, ctx->rank, kPerfKeyIter, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));

    mgpu_timing tm;
    memset(&tm, 0, sizeof tm);
    tm.case_name = c->name;
    tm.bytes = 2.0 * (double)total; /* both directions of every round trip */
    tm.factor = 1.0;
    tm.metric = "time";
    mgpu_time_pair(ctx, &tm, op_yours, &t, op_nccl, &t, stream);
    finish_or_fail(stream, ctx, "pingpong_run (timed)");

    unsigned long long ns = 0;
    MGPU_CUDA(cudaMemcpy(&ns, t.elapsed, sizeof ns, cudaMemcpyDeviceToHost));
    if (ctx->rank == 0) {
      mgpu_note("case %s: one timed operation is %d round trips of %zu-byte messages, %d one-way "
                "messages: divide its time by %d for the one-way latency",
                c->name, t.rounds, t.bytes, 2 * t.rounds, 2 * t.rounds);
      if (ns > 0)
        mgpu_value("one-way latency by your kernel's own clock (elapsed_ns / 2 rounds)",
                   (double)ns / 1000.0 / (2.0 * t.rounds), "us");
      else
        mgpu_note("your kernel did not write elapsed_ns: no figure of your own to show");
    }
  }
  check_after_timing(ctx, &t, c->name, stream);
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFree(t.elapsed));
    mgpu_free(&t.nccl_received);
    mgpu_free(&t.received);
    mgpu_free(&t.keys);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream = NULL;
  ncclUniqueId id;
  ncclComm_t comm = NULL;

  mgpu_init(&ctx, argc, argv);
  if (mgpu_computes(&ctx)) {
    /* Messages are at most a few MiB; NVSHMEM reserves 1 GiB unless told otherwise. NCCL is
     * the baseline here, so NVSHMEM is asked not to bring up one of its own. Both are read when
     * NVSHMEM starts. */
    setenv("NVSHMEM_SYMMETRIC_SIZE", "64M", 1);
    setenv("NVSHMEM_DISABLE_NCCL", "1", 0);
    mgpu_nvshmem_init(&ctx);
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    mgpu_nccl_unique_id(&ctx, &id);
    MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));
  }

  size_t max_bytes = 1;
  for (int k = 0; k < ctx.ncases; k++)
    if (ctx.cases[k].n > 0 && (size_t)ctx.cases[k].n > max_bytes) max_bytes = (size_t)ctx.cases[k].n;
  if (ctx.perf)
    for (int k = 0; k < ctx.nperf_cases; k++)
      if (ctx.perf_cases[k].n > 0 && (size_t)ctx.perf_cases[k].n > max_bytes)
        max_bytes = (size_t)ctx.perf_cases[k].n;
  if (max_bytes > ((size_t)64 << 20)) max_bytes = (size_t)64 << 20;

  /* What the PE found of pingpong_setup, as a fact it hands over: {first bad PE, what}. */
  pingpong pp;
  memset(&pp, 0, sizeof pp);
  int setup[2] = {-1, kSetupOK};
  if (mgpu_computes(&ctx)) {
    MGPU_LEARNER(pingpong_setup(&pp, max_bytes));
    setup[0] = agree_setup(&ctx, judge_setup(&pp, max_bytes, ctx.rank), &setup[1]);
  }
  mgpu_hand_over(&ctx, "setup", setup, sizeof setup);
  if (setup[0] >= 0) {
    for (int k = 0; k < ctx.ncases; k++)
      setup_failed(&ctx, &ctx.cases[k], setup[0], setup[1], max_bytes);
  } else {
    for (int k = 0; k < ctx.ncases; k++) run_case(&ctx, &pp, k, stream);
    if (ctx.perf)
      for (int k = 0; k < ctx.nperf_cases; k++)
        run_perf(&ctx, &pp, &ctx.perf_cases[k], comm, stream);
  }

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamSynchronize(stream));
    mgpu_barrier(&ctx, "teardown"); /* a PE that died fails here, not in NVSHMEM's barrier */
    MGPU_LEARNER(pingpong_teardown(&pp));
    MGPU_NCCL(ncclCommDestroy(comm));
    MGPU_CUDA(cudaStreamDestroy(stream));
    nvshmem_finalize();
  }
  return mgpu_finish(&ctx);
}
