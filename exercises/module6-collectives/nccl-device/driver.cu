/*
 * driver.cu: module6/nccl-device (course-owned).
 *
 * One process per GPU (launcher "local"). Setup, on every rank: an NCCL communicator from
 * rank 0's unique id; one buffer of kInOffset + 4 * max_n bytes from ncclMemAlloc, registered
 * as a symmetric window (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC); a device
 * communicator (ncclDevCommCreate) with ND_MAX_BLOCKS LSA barriers and multimem off (NVLink
 * SHARP stays untouched: NCCL_NVLS_ENABLE=0 is in every rank's environment, and nothing here
 * asks for multimem). NCCL's device API needs every rank in one LSA team (one node, direct peer
 * access between every pair of GPUs).
 *
 * Correctness. Each case (n floats; a name starting with "alone" gives every rank a team of
 * one) runs K = max(4, 2 x world) iterations, each with new exact data. Iteration k has a
 * "late" rank L = k mod world. The ranks meet at a host barrier, then each queues on its stream:
 *   1. a delay kernel: 5 ms, on rank L 7 ms;
 *   2. the fill of this rank's input (window offset kInOffset) with fine exact values of (rank, k);
 *   3. the poison (0xFF) of this iteration's `out`. On rank L, out is pinned host memory mapped
 *      for the GPU, elsewhere device memory: L's kernel stores its result over PCIe, so each of
 *      its blocks runs longer than its partner blocks on the other ranks;
 *   4. allreduce_device(args, stream);
 *   5. the poison of this rank's input: legal only once no peer reads it any more.
 * Then a bounded wait (a hang is named, not timed out), out is read back on the same stream and
 * handed over, and the verifier compares it, every element, with the sum of the team's exact
 * inputs.
 * What each mistake does:
 *   - no barrier before the reads: the other ranks read L's input 2 ms before L writes it and
 *     sum the poison (NaN): caught on the ranks that are not late;
 *   - no barrier after the reads: a rank returns as soon as its own reads are done and its
 *     step 5 poisons its input while L, slowed by its stores to host memory, is still reading
 *     it: caught on L. An estimate, assuming ~50 GB/s for L's stores over PCIe and ~400 GB/s
 *     of NVLink reads into each GPU: in the 64 MiB case a fast rank is done after reading
 *     (world - 1) x 64 MiB, L only after storing 64 MiB to the host, so L still has most of its
 *     reads ahead with 2 ranks and only the last ~10 % with 8 (to be confirmed on 2xH200, and on
 *     more GPUs where lent);
 *   - work on another stream than the one given: it starts at once, during step 1, and is done
 *     long before step 3 poisons out: the driver finds out all poison, every iteration;
 *   - a team assumed to have two ranks (peer = rank ^ 1): right with the whole team on 2 GPUs,
 *     wrong in the "alone" cases. A team of one is {nRanks 1, rank 0, stride +1 or -1}: the
 *     stride makes team rank 1 -- which does not exist -- land on a neighbour's real input (the
 *     last LSA rank gets -1), so code that reads it sums real, wrong data and fails at
 *     correctness instead of faulting on unmapped memory. Correct code never uses the stride
 *     of a team of one. Why not a real 1-rank communicator (ncclCommSplit): NCCL 2.28 gives a
 *     communicator with one local rank no symmetric support (ncclTransportCheckP2pType), so
 *     ncclDevCommCreate would refuse it.
 *
 * Performance: allreduce_device on the whole team against ncclAllReduce (sum, float) on the same
 * communicator, out of place on ordinary cudaMalloc buffers (no window, so NCCL takes its usual
 * path), alternating (mgpu_time_pair, metric time), 4 KiB .. 1 MiB; the manifest's headline is
 * 64 KiB. Then "after-timing": new data through the timed buffers, checked once.
 *
 * Split (`verifier: true`, docs/protocol.md §4). The rank (mgpu_computes) does all of the above
 * on its GPU, fills only its own inputs, and hands over what it read back, in this order:
 *   per case, per iteration k:  "<case>/<k>"           out, n floats (as read after the call)
 *   per case:                   "<case>/guards"        long long: guard bytes hit around out
 *   after timing (MGPU_PERF):   "after-timing/out"     the largest perf case's n floats
 *                               "after-timing/guards"  long long
 * Its verifier (mgpu_verifies; built with -DMGPU_VERIFIER: no GPU, no NCCL, no rendezvous) walks
 * the same cases and iterations (the late rank and the team follow from the rank, the world and
 * the case name), makes the expected sums on the CPU from the seed (team rank p of the whole
 * team is world rank p: setup checks it in the rank; a team of one is the rank itself), compares,
 * explains and records every case. The rank never knows another rank's inputs. Without a
 * verifier one process does both, and the hand-overs leave the buffers as they are.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_dev.h"
#include "timed_probes.cuh"

static const size_t kInOffset = 4096;                /* inputs start one page into the window */
static const long long kLeadNs = 5LL * 1000 * 1000; /* every rank's stream waits this long first */
static const long long kLateNs = 2LL * 1000 * 1000; /* and the late rank's this much longer */
static const double kHangS = 30.0;
static const char *const kFn = "allreduce_device";
static const uint32_t kPoisonBits = 0xFFFFFFFFu;     /* what the driver's poison (0xFF bytes) reads as */
static const int kTimedIter = 900;                   /* the inputs of the timed calls */
static const int kAfterTimingIter = 901;             /* the inputs of the call after them */

/* ---- device helpers ------------------------------------------------------------------------ */

__global__ void k_poison(float *p, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = __uint_as_float(0xFFFFFFFFu);
}

static void expect_no_pending_error(void) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s left a CUDA error unchecked: %s (%s). Put MGPU_KERNEL() after each launch.", kFn,
             cudaGetErrorName(e), cudaGetErrorString(e));
    mgpu_fail("learner", kFn, __FILE__, __LINE__, (long)e, msg);
  }
}

/* ---- setup ----------------------------------------------------------------------------------- */

typedef struct world {
  ncclComm_t comm;
  ncclDevComm dev;
  ncclWindow_t win;
  void *base;  /* this rank's window buffer (ncclMemAlloc) */
  float *in;   /* base + kInOffset */
  size_t bytes;
  cudaStream_t stream;
} world;

static ncclTeam_t team_all(const world *w) { return ncclTeamLsa(w->dev); }

/* A team of one rank: only team rank 0 (this rank) exists. The stride is unused by correct
 * code; it points team rank 1 at a neighbour's real input (see the top of the file). */
static ncclTeam_t team_alone(const world *w) {
  ncclTeam_t t;
  t.nRanks = 1;
  t.rank = 0;
  t.stride = w->dev.lsaRank + 1 < w->dev.lsaSize ? 1 : -1;
  return t;
}

static nd_args args_for(const world *w, float *out, size_t n, ncclTeam_t team) {
  nd_args a;
  memset(&a, 0, sizeof a);
  a.comm = w->comm;
  a.dev = w->dev;
  a.win = w->win;
  a.in_offset = kInOffset;
  a.in = w->in;
  a.out = out;
  a.n = n;
  a.team = team;
  a.max_blocks = ND_MAX_BLOCKS;
  return a;
}

static long long max_case_n(const mgpu_ctx *ctx) {
  long long m = 1;
  for (int k = 0; k < ctx->ncases; k++)
    if (ctx->cases[k].n > m) m = ctx->cases[k].n;
  for (int k = 0; k < ctx->nperf_cases; k++)
    if (ctx->perf_cases[k].n > m) m = ctx->perf_cases[k].n;
  return m;
}

static void setup(mgpu_ctx *ctx, world *w) {
  ncclUniqueId id;
  mgpu_nccl_unique_id(ctx, &id);
  MGPU_NCCL(ncclCommInitRank(&w->comm, ctx->world, id, ctx->rank));

  w->bytes = kInOffset + sizeof(float) * (size_t)max_case_n(ctx);
  MGPU_NCCL(ncclMemAlloc(&w->base, w->bytes));
  w->in = (float *)((char *)w->base + kInOffset);
  MGPU_NCCL(ncclCommWindowRegister(w->comm, w->base, w->bytes, &w->win, NCCL_WIN_COLL_SYMMETRIC));

  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof reqs); /* no multimem, no GIN, no extra resources */
  reqs.lsaMultimem = false;
  reqs.lsaBarrierCount = ND_MAX_BLOCKS;
  ncclResult_t r = ncclDevCommCreate(w->comm, &reqs, &w->dev);
  if (r != ncclSuccess) {
    char msg[400];
    snprintf(msg, sizeof msg,
             "ncclDevCommCreate failed: %s. NCCL's device API needs symmetric memory support: every rank on one "
             "node, direct peer access (NVLink or PCIe P2P) between every pair of GPUs, and cuMem "
             "(NCCL_CUMEM_ENABLE not 0, NCCL_WIN_ENABLE not 0). NCCL_DEBUG=WARN says which is missing.",
             ncclGetErrorString(r));
    mgpu_fail("driver", "ncclDevCommCreate", __FILE__, __LINE__, (long)r, msg);
  }
  if (w->dev.lsaSize != ctx->world || w->dev.nRanks != ctx->world || w->dev.rank != ctx->rank) {
    char msg[300];
    snprintf(msg, sizeof msg,
             "the device communicator's LSA team has %d of %d ranks (this is rank %d, LSA rank %d): this exercise "
             "needs every rank to reach every other through load/store (one node, peer access everywhere)",
             w->dev.lsaSize, w->dev.nRanks, w->dev.rank, w->dev.lsaRank);
    mgpu_fail("driver", "ncclDevCommCreate", __FILE__, __LINE__, 0, msg);
  }
  {
    /* The verifier, which has no device communicator, sums world ranks 0 .. world-1 for a call on
     * the whole team: team rank p must be world rank p. */
    const ncclTeam_t all = team_all(w);
    int in_order = all.nRanks == ctx->world && all.rank == ctx->rank;
    for (int p = 0; in_order && p < all.nRanks; p++) in_order = ncclTeamRankToWorld(w->dev, all, p) == p;
    if (!in_order)
      mgpu_fail("driver", "ncclTeamLsa", __FILE__, __LINE__, 0,
                "the LSA team does not list the world's ranks in world order (team rank p = world rank p), which "
                "the driver's expected sums assume");
  }
  MGPU_CUDA(cudaMemset(w->base, 0xFF, w->bytes));
  MGPU_CUDA(cudaDeviceSynchronize());

  MGPU_CUDA(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
  mgpu_value("LSA team size (ranks reached by load/store)", w->dev.lsaSize, "ranks");
  mgpu_barrier(ctx, "setup");
}

static void teardown(mgpu_ctx *ctx, world *w) {
  MGPU_CUDA(cudaDeviceSynchronize());
  mgpu_barrier(ctx, "teardown");
  MGPU_NCCL(ncclDevCommDestroy(w->comm, &w->dev));
  MGPU_NCCL(ncclCommWindowDeregister(w->comm, w->win));
  MGPU_NCCL(ncclMemFree(w->base));
  MGPU_NCCL(ncclCommDestroy(w->comm));
  MGPU_CUDA(cudaStreamDestroy(w->stream));
}

/* ---- one call, checked ----------------------------------------------------------------------- */

static void call_learner(world *w, const nd_args *a) {
  (void)w; /* compiled out of the verifier */
  (void)a;
  MGPU_LEARNER(allreduce_device(a, w->stream));
  expect_no_pending_error();
}

typedef struct verdict {
  mgpu_result r;
  long long nan_early, nan_late, wrong, unwritten;
  int iters, iters_all_unwritten, iters_part_unwritten, iters_bad;
  int first_iter;
} verdict;

static void verdict_init(verdict *v, long long n) {
  memset(v, 0, sizeof *v);
  mgpu_result_init(&v->r, n);
  v->first_iter = -1;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* The verifier's comparison of one call's out (as the rank read it back, on the stream it passed)
 * with the sum of the exact inputs of iteration `iter` of the team's world ranks: every rank in
 * world order (setup checked that team rank p is world rank p) or, for a team of one, this rank
 * alone. The same float additions in the same order as a kernel that adds team ranks 0, 1, ...
 * starting from 0, though with fine exact inputs (multiples of 1/64) any order is exact. Adds the counts to v;
 * the first wrong call (index k in its case) gives the mismatches of the report. `late`: this
 * rank was the call's late (and slow) rank. */
static void compare_host(const mgpu_ctx *ctx, const float *got, long long n, int alone, int iter, int late, int k,
                         verdict *v) {
  const int members = alone ? 1 : ctx->world;
  uint64_t *keys = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)members);
  if (!keys) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  for (int m = 0; m < members; m++) keys[m] = mgpu_exact_key(ctx->seed, alone ? ctx->rank : m, iter);
  const int sample = v->first_iter < 0; /* no wrong call yet: this one's mismatches are reported */
  long long unwritten = 0, nan = 0, wrong = 0;
  for (long long i = 0; i < n; i++) {
    float want = 0.0f;
    for (int m = 0; m < members; m++) want += mgpu_fine_value_k(keys[m], i);
    const uint32_t gb = float_bits(got[i]);
    if (gb == float_bits(want)) continue;
    if (gb == kPoisonBits)
      unwritten++;
    else if ((gb & 0x7F800000u) == 0x7F800000u && (gb & 0x007FFFFFu) != 0)
      nan++;
    else
      wrong++;
    if (sample && v->r.nfirst < 8) {
      mgpu_mismatch *mm = &v->r.first[v->r.nfirst++];
      mm->i = i;
      if (gb == kPoisonBits)
        snprintf(mm->got, sizeof mm->got, "NaN(poison)");
      else
        snprintf(mm->got, sizeof mm->got, "%.9g", got[i]);
      snprintf(mm->want, sizeof mm->want, "%.9g", want);
    }
  }
  free(keys);
  v->iters++;
  v->r.checked += n;
  const long long bad = nan + wrong;
  v->r.bad += bad;
  v->r.unwritten += unwritten;
  if (late)
    v->nan_late += nan;
  else
    v->nan_early += nan;
  v->wrong += wrong;
  v->unwritten += unwritten;
  if (unwritten == n)
    v->iters_all_unwritten++;
  else if (unwritten > 0)
    v->iters_part_unwritten++;
  if (bad + unwritten == 0) return;
  v->iters_bad++;
  if (v->first_iter < 0) v->first_iter = k;
}

static void append(char *dst, size_t len, const char *s) {
  const size_t used = strlen(dst);
  if (used + 2 >= len) return;
  snprintf(dst + used, len - used, "%s%s", used ? " " : "", s);
}

/* The case's explanation, from what went wrong where; the most basic finding first. */
static void explain(const mgpu_ctx *ctx, int alone, verdict *v) {
  char s[300];
  char *msg = v->r.msg;
  const size_t len = sizeof v->r.msg;
  msg[0] = 0;
  if (v->unwritten > 0) {
    if (v->iters_all_unwritten == v->iters)
      snprintf(s, sizeof s,
               "rank %d: out was still the poison when the driver read it after your call, on the stream it "
               "passed: nothing wrote it, or your kernel ran on another stream.",
               ctx->rank);
    else if (v->iters_all_unwritten > 0)
      snprintf(s, sizeof s,
               "rank %d: in %d of %d iterations out was still the poison when the driver read it on the stream it "
               "passed: your kernel runs on another stream, unordered with the driver's work.",
               ctx->rank, v->iters_all_unwritten, v->iters);
    else
      snprintf(s, sizeof s,
               "rank %d: %lld element(s) of out never written: does the grid cover all n, the tail after the last "
               "full vector included?",
               ctx->rank, v->unwritten);
    append(msg, len, s);
  }
  if (alone && v->r.bad > 0) {
    snprintf(s, sizeof s,
             "rank %d, team of one (team.nRanks = 1): out must be this rank's own input, but %lld element(s) differ. "
             "Sum team.nRanks ranks of `team`, not a partner such as rank ^ 1.",
             ctx->rank, v->r.bad);
    append(msg, len, s);
    return;
  }
  if (v->nan_early > 0) {
    snprintf(s, sizeof s,
             "rank %d summed the poison (%lld NaN) when another rank was late: it read that rank's input before it "
             "had written it. Wait at an LSA barrier before the reads.",
             ctx->rank, v->nan_early);
    append(msg, len, s);
  }
  if (v->nan_late > 0) {
    snprintf(s, sizeof s,
             "rank %d, slow, summed the poison (%lld NaN): a peer overwrote its input while this rank was still "
             "reading it. Meet the peers at a barrier after the reads too.",
             ctx->rank, v->nan_late);
    append(msg, len, s);
  }
  if (v->wrong > 0) {
    snprintf(s, sizeof s,
             "%lld wrong sum(s): add each team rank's input once, team rank p's at ncclGetPeerPointer(win, "
             "in_offset, team, p).",
             v->wrong);
    append(msg, len, s);
  }
}

/* One case. Hand-overs, in this order: "<case>/<k>" (out of call k, n floats) for k = 0 ..
 * iters-1, then "<case>/guards" (a long long: guard bytes hit around out, device-memory calls). */
static void run_case(mgpu_ctx *ctx, world *w, const mgpu_case *c, int case_index) {
  const long long n = c->n;
  const size_t bytes = sizeof(float) * (size_t)n;
  const int alone = strncmp(c->name, "alone", 5) == 0;
  const int iters = ctx->world * 2 > 4 ? ctx->world * 2 : 4;
  char tag[128];

  /* out: device memory (guarded), or pinned host memory mapped for the GPU on the late rank.
   * got: what the rank reads back and hands over (in the verifier: what it receives). */
  mgpu_buf dout;
  memset(&dout, 0, sizeof dout);
  float *hout = NULL, *hout_dev = NULL;
  float *got = (float *)mgpu_host_alloc(ctx, bytes ? bytes : sizeof(float));
  ncclTeam_t team;
  memset(&team, 0, sizeof team);
  if (mgpu_computes(ctx)) {
    team = alone ? team_alone(w) : team_all(w);
    dout = mgpu_alloc(bytes, ctx->device);
    MGPU_CUDA(cudaHostAlloc((void **)&hout, bytes, cudaHostAllocMapped));
    MGPU_CUDA(cudaHostGetDevicePointer((void **)&hout_dev, hout, 0));

    /* Every input starts as the poison, on every rank, before anyone's first call. */
    MGPU_CUDA(cudaMemsetAsync(w->in, 0xFF, bytes, w->stream));
    MGPU_CUDA(cudaStreamSynchronize(w->stream));
    mgpu_barrier(ctx, "case-poisoned");
  }

  verdict v;
  verdict_init(&v, n);
  long long hits = 0;
  for (int k = 0; k < iters; k++) {
    const int iter = 1000 * (case_index + 1) + k;
    const int late = (k % ctx->world) == ctx->rank;
    if (mgpu_computes(ctx)) {
      float *out = late ? hout_dev : (float *)dout.ptr;
      mgpu_barrier(ctx, "iteration"); /* every rank queues what follows within a fraction of a ms */
      mgpu_delay(w->stream, late ? kLeadNs + kLateNs : kLeadNs);
      mgpu_fill_fine_f32(w->in, n, ctx->seed, ctx->rank, iter, w->stream);
      if (late) {
        k_poison<<<256, 512, 0, w->stream>>>(out, n);
        MGPU_KERNEL();
      } else {
        mgpu_poison(&dout, w->stream);
      }
      const nd_args a = args_for(w, out, (size_t)n, team);
      call_learner(w, &a);
      /* Legal only once no peer reads this rank's input any more: the barrier after the reads. */
      MGPU_CUDA(cudaMemsetAsync(w->in, 0xFF, bytes, w->stream));
      mgpu_wait_or_hang(ctx, w->stream, kHangS, kFn,
                        "does every rank launch the same grid, and does every block pass the same LSA barriers "
                        "(same index, same number of syncs) on every rank?");
      /* out as it is now, read on the stream the learner was given. */
      MGPU_CUDA(cudaMemcpyAsync(got, out, bytes, cudaMemcpyDefault, w->stream));
      MGPU_CUDA(cudaStreamSynchronize(w->stream));
      if (!late) hits += mgpu_guard_hits(&dout);
    }
    snprintf(tag, sizeof tag, "%s/%d", c->name, k);
    if (mgpu_hand_over(ctx, tag, got, bytes)) compare_host(ctx, got, n, alone, iter, late, k, &v);
  }
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  mgpu_hand_over(ctx, tag, &hits, sizeof hits);
  if (mgpu_verifies(ctx)) {
    v.r.guard_hits = hits;
    explain(ctx, alone, &v);
    if (v.r.guard_hits > 0 && !v.r.msg[0])
      snprintf(v.r.msg, sizeof v.r.msg,
               "rank %d: bytes just outside out[0..n) changed: write out[0..n) and nothing else", ctx->rank);
    mgpu_record_case(c->name, &v.r, 0);
  }

  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaDeviceSynchronize());
    MGPU_CUDA(cudaFreeHost(hout));
    mgpu_free(&dout);
    mgpu_barrier(ctx, "case-done"); /* nobody re-poisons an input that a peer may still read */
  }
  mgpu_host_free(ctx, got);
}

/* ---- timing ------------------------------------------------------------------------------------ */

typedef struct perf_op {
  world *w;
  nd_args a;
  const float *send;
  float *recv;
  size_t n;
  ar_probes pr; /* timed_probes.cuh: w->in and send changed alike, out and recv checked */
} perf_op;

static void op_yours(void *arg, int iter, cudaStream_t stream) {
  perf_op *p = (perf_op *)arg;
  (void)iter;
  const uint64_t k = ar_probe_before(&p->pr, stream);
  MGPU_LEARNER(allreduce_device(&p->a, stream));
  ar_probe_after(&p->pr, 0, p->a.out, k, stream);
}

static void op_nccl(void *arg, int iter, cudaStream_t stream) {
  perf_op *p = (perf_op *)arg;
  (void)iter;
  const uint64_t k = ar_probe_before(&p->pr, stream);
  MGPU_NCCL_OWN(ncclAllReduce(p->send, p->recv, p->n, ncclFloat, ncclSum, p->w->comm, stream));
  ar_probe_after(&p->pr, 1, p->recv, k, stream);
}

/* The rank times every perf case, then makes one more call on the timed buffers with new data
 * (iteration kAfterTimingIter) and hands over "after-timing/out" (the largest perf case's n
 * floats) and "after-timing/guards" (a long long); the verifier compares them into the case
 * "after-timing". */
static void run_perf(mgpu_ctx *ctx, world *w) {
  long long maxn = 1;
  for (int k = 0; k < ctx->nperf_cases; k++)
    if (ctx->perf_cases[k].n > maxn) maxn = ctx->perf_cases[k].n;
  const long long n = maxn;
  const size_t bytes = sizeof(float) * (size_t)n;
  float *got = (float *)mgpu_host_alloc(ctx, bytes);
  long long hits = 0;
  ar_probe probes[2], total[2]; /* per case; all cases: counts summed, the first miss kept */
  memset(total, 0, sizeof total);
  if (mgpu_computes(ctx)) {
    mgpu_buf out = mgpu_alloc(bytes, ctx->device);
    mgpu_buf send = mgpu_alloc(bytes, ctx->device);
    mgpu_buf recv = mgpu_alloc(bytes, ctx->device);
    mgpu_fill_fine_f32(w->in, maxn, ctx->seed, ctx->rank, kTimedIter, w->stream);
    mgpu_fill_fine_f32((float *)send.ptr, maxn, ctx->seed, ctx->rank, kTimedIter, w->stream);
    MGPU_CUDA(cudaStreamSynchronize(w->stream));
    mgpu_barrier(ctx, "perf-filled");

    for (int k = 0; k < ctx->nperf_cases; k++) {
      const mgpu_case *c = &ctx->perf_cases[k];
      perf_op p;
      p.w = w;
      p.a = args_for(w, (float *)out.ptr, (size_t)c->n, team_all(w));
      p.send = (const float *)send.ptr;
      p.recv = (float *)recv.ptr;
      p.n = (size_t)c->n;
      mgpu_timing t;
      memset(&t, 0, sizeof t);
      t.case_name = c->name;
      t.bytes = (double)c->n * sizeof(float);
      t.factor = 2.0 * (ctx->world - 1) / ctx->world;
      t.metric = "time";
      /* The probes' reference: NCCL's sum of the inputs the timed calls start from. Every case
       * starts from the same inputs: the previous case's probes are undone by a fresh fill. */
      mgpu_fill_fine_f32(w->in, maxn, ctx->seed, ctx->rank, kTimedIter, w->stream);
      mgpu_fill_fine_f32((float *)send.ptr, maxn, ctx->seed, ctx->rank, kTimedIter, w->stream);
      char tag[96];
      snprintf(tag, sizeof tag, "nd-probe-key/%s", c->name);
      ar_probes_begin(ctx, &p.pr, w->in, (float *)send.ptr, c->n, tag);
      MGPU_NCCL_OWN(ncclAllReduce(p.send, p.pr.ref, p.n, ncclFloat, ncclSum, w->comm, w->stream));
      MGPU_CUDA(cudaStreamSynchronize(w->stream));
      mgpu_barrier(ctx, "perf-probe-ready");
      mgpu_time_pair(ctx, &t, op_yours, &p, op_nccl, &p, w->stream);
      MGPU_CUDA(cudaDeviceSynchronize());
      ar_probes_end(&p.pr, probes);
      mgpu_barrier(ctx, "perf-probed");
      for (int x = 0; x < 2; x++) {
        if (probes[x].bad && !total[x].bad) { /* the first miss: where, and in which case */
          total[x].at = probes[x].at;
          total[x].got = probes[x].got;
          total[x].want = probes[x].want;
          total[x].call = probes[x].call;
          total[x].pad = (unsigned int)k;
        }
        total[x].bad += probes[x].bad;
        total[x].probes += probes[x].probes;
      }
    }
    MGPU_CUDA(cudaDeviceSynchronize());
    mgpu_barrier(ctx, "perf-done");

    /* New data through the timed buffers: a kernel that skips work it has seen fails here. */
    mgpu_poison(&out, w->stream);
    mgpu_fill_fine_f32(w->in, n, ctx->seed, ctx->rank, kAfterTimingIter, w->stream);
    MGPU_CUDA(cudaStreamSynchronize(w->stream));
    mgpu_barrier(ctx, "after-timing-filled");
    const nd_args a = args_for(w, (float *)out.ptr, (size_t)n, team_all(w));
    call_learner(w, &a);
    mgpu_wait_or_hang(ctx, w->stream, kHangS, kFn, "the same call passed before the timing");
    MGPU_CUDA(cudaMemcpyAsync(got, out.ptr, bytes, cudaMemcpyDeviceToHost, w->stream));
    MGPU_CUDA(cudaStreamSynchronize(w->stream));
    hits = mgpu_guard_hits(&out);
    mgpu_free(&out);
    mgpu_free(&send);
    mgpu_free(&recv);
  }
  verdict v;
  verdict_init(&v, n);
  if (mgpu_hand_over(ctx, "after-timing/out", got, bytes)) compare_host(ctx, got, n, 0, kAfterTimingIter, 0, 0, &v);
  mgpu_hand_over(ctx, "after-timing/guards", &hits, sizeof hits);
  mgpu_hand_over(ctx, "after-timing/probes", total, sizeof total);
  if (mgpu_verifies(ctx) && total[1].bad) {
    char msg[400];
    snprintf(msg, sizeof msg,
             "a probe of the timed calls found ncclAllReduce's recv[%lld] = %.9g where the reference says %.9g (%u "
             "probed calls): the probe is wrong, not your code (a course bug)",
             total[1].at, (double)total[1].got, (double)total[1].want, total[1].probes);
    mgpu_fail("driver", "probe", __FILE__, __LINE__, 0, msg);
  }
  if (mgpu_verifies(ctx)) {
    v.r.guard_hits = hits;
    const long long fresh_bad = v.r.bad; /* the call after timing */
    v.r.checked += (long long)total[0].probes * kProbeLanes;
    v.r.bad += total[0].bad;
    if (fresh_bad + v.r.unwritten > 0)
      snprintf(v.r.msg, sizeof v.r.msg,
               "after-timing: new inputs in the timed buffers gave a wrong result (%lld wrong, %lld unwritten): does "
               "%s skip work it has seen before?",
               fresh_bad, v.r.unwritten, kFn);
    else if (total[0].bad && total[0].pad < (unsigned int)ctx->nperf_cases)
      snprintf(v.r.msg, sizeof v.r.msg,
               "timing %s: a timed call left out[%lld] = %.9g where the sum of the inputs was %.9g (op %u; %u wrong of "
               "the places probed in %u timed calls). Before some timed calls the driver changes one rank's input at a "
               "few places, and only that rank knows: every call must read every rank's current input and write all "
               "of out, even when out already holds a result",
               ctx->perf_cases[total[0].pad].name, total[0].at, (double)total[0].got, (double)total[0].want,
               total[0].call, total[0].bad, total[0].probes);
    else if (v.r.guard_hits > 0)
      snprintf(v.r.msg, sizeof v.r.msg,
               "after-timing: bytes just outside out[0..n) changed: write out[0..n) and nothing else");
    mgpu_record_case("after-timing", &v.r, 0);
  }
  mgpu_host_free(ctx, got);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  world w;
  memset(&w, 0, sizeof w);
  if (mgpu_computes(&ctx)) setup(&ctx, &w);
  for (int k = 0; k < ctx.ncases; k++) run_case(&ctx, &w, &ctx.cases[k], k);
  if (ctx.perf) run_perf(&ctx, &w);
  if (mgpu_computes(&ctx)) teardown(&ctx, &w);
  return mgpu_finish(&ctx);
}
