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
 *   2. the fill of this rank's input (window offset kInOffset) with exact values of (rank, k);
 *   3. the poison (0xFF) of this iteration's `out`. On rank L, out is pinned host memory mapped
 *      for the GPU, elsewhere device memory: L's kernel stores its result over PCIe, so each of
 *      its blocks runs longer than its partner blocks on the other ranks;
 *   4. allreduce_device(args, stream);
 *   5. the poison of this rank's input: legal only once no peer reads it any more.
 * Then a bounded wait (a hang is named, not timed out), and out is compared, every element,
 * with the sum of the team's exact inputs.
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
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_dev.h"

static const size_t kInOffset = 4096;                /* inputs start one page into the window */
static const long long kLeadNs = 5LL * 1000 * 1000; /* every rank's stream waits this long first */
static const long long kLateNs = 2LL * 1000 * 1000; /* and the late rank's this much longer */
static const double kHangS = 30.0;
static const char *const kFn = "allreduce_device";

/* ---- device helpers ------------------------------------------------------------------------ */

__global__ void k_poison(float *p, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = __uint_as_float(0xFFFFFFFFu);
}

__global__ void k_add(float *acc, const float *x, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) acc[i] += x[i];
}

typedef struct tally {
  unsigned long long unwritten; /* still the poison: out was never written there */
  unsigned long long nan;       /* a NaN: an input was read while it held the poison */
  unsigned long long wrong;     /* any other wrong value */
  unsigned long long first;     /* smallest bad index, ~0 when none */
} tally;

__global__ void k_compare(const float *got, const float *want, long long n, tally *t) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint32_t g = __float_as_uint(got[i]), w = __float_as_uint(want[i]);
    if (g == w) continue;
    if (g == 0xFFFFFFFFu)
      atomicAdd(&t->unwritten, 1ULL);
    else if (isnan(got[i]))
      atomicAdd(&t->nan, 1ULL);
    else
      atomicAdd(&t->wrong, 1ULL);
    atomicMin(&t->first, (unsigned long long)i);
  }
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
  allreduce_device(a, w->stream);
  expect_no_pending_error();
}

/* want = sum of the exact inputs of the team's world ranks for iteration `iter`. */
static void expected(const mgpu_ctx *ctx, const world *w, ncclTeam_t team, float *want, float *tmp, long long n,
                     int iter) {
  MGPU_CUDA(cudaMemsetAsync(want, 0, sizeof(float) * (size_t)n, w->stream));
  for (int p = 0; p < team.nRanks; p++) {
    const int q = ncclTeamRankToWorld(w->dev, team, p);
    mgpu_fill_exact_f32(tmp, n, ctx->seed, q, iter, w->stream);
    k_add<<<256, 512, 0, w->stream>>>(want, tmp, n);
    MGPU_KERNEL();
  }
}

typedef struct verdict {
  mgpu_result r;
  long long nan_early, nan_late, wrong, unwritten;
  int iters, iters_all_unwritten, iters_part_unwritten, iters_bad;
  int first_iter;
} verdict;

/* Compares out (device memory, or host memory mapped for the device) with want; adds the
 * counts to v. */
static void compare(world *w, const float *out, const float *want, long long n, int late, int iter, tally *dt,
                    tally *ht, verdict *v) {
  ht->unwritten = ht->nan = ht->wrong = 0;
  ht->first = ~0ULL;
  MGPU_CUDA(cudaMemcpyAsync(dt, ht, sizeof *ht, cudaMemcpyHostToDevice, w->stream));
  k_compare<<<256, 512, 0, w->stream>>>(out, want, n, dt);
  MGPU_KERNEL();
  MGPU_CUDA(cudaMemcpyAsync(ht, dt, sizeof *ht, cudaMemcpyDeviceToHost, w->stream));
  MGPU_CUDA(cudaStreamSynchronize(w->stream));
  v->iters++;
  v->r.checked += n;
  const long long bad = (long long)(ht->nan + ht->wrong);
  v->r.bad += bad;
  v->r.unwritten += (long long)ht->unwritten;
  if (late)
    v->nan_late += (long long)ht->nan;
  else
    v->nan_early += (long long)ht->nan;
  v->wrong += (long long)ht->wrong;
  v->unwritten += (long long)ht->unwritten;
  if ((long long)ht->unwritten == n)
    v->iters_all_unwritten++;
  else if (ht->unwritten > 0)
    v->iters_part_unwritten++;
  if (bad + (long long)ht->unwritten == 0) return;
  v->iters_bad++;
  if (v->first_iter >= 0) return;
  v->first_iter = iter;
  /* The first mismatches of the first bad iteration, for the report. */
  const long long from = (long long)ht->first, cnt = n - from < 4096 ? n - from : 4096;
  float *g = (float *)malloc(sizeof(float) * (size_t)cnt), *h = (float *)malloc(sizeof(float) * (size_t)cnt);
  if (!g || !h) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  MGPU_CUDA(cudaMemcpy(g, out + from, sizeof(float) * (size_t)cnt, cudaMemcpyDefault));
  MGPU_CUDA(cudaMemcpy(h, want + from, sizeof(float) * (size_t)cnt, cudaMemcpyDefault));
  for (long long i = 0; i < cnt && v->r.nfirst < 8; i++) {
    uint32_t gb, wb;
    memcpy(&gb, &g[i], 4);
    memcpy(&wb, &h[i], 4);
    if (gb == wb) continue;
    mgpu_mismatch *mm = &v->r.first[v->r.nfirst++];
    mm->i = from + i;
    if (gb == 0xFFFFFFFFu)
      snprintf(mm->got, sizeof mm->got, "NaN(poison)");
    else
      snprintf(mm->got, sizeof mm->got, "%.9g", g[i]);
    snprintf(mm->want, sizeof mm->want, "%.9g", h[i]);
  }
  free(g);
  free(h);
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

static void run_case(mgpu_ctx *ctx, world *w, const mgpu_case *c, int case_index) {
  const long long n = c->n;
  const size_t bytes = sizeof(float) * (size_t)n;
  const int alone = strncmp(c->name, "alone", 5) == 0;
  const ncclTeam_t team = alone ? team_alone(w) : team_all(w);
  const int iters = ctx->world * 2 > 4 ? ctx->world * 2 : 4;

  /* out: device memory (guarded), or pinned host memory mapped for the GPU on the late rank. */
  mgpu_buf dout = mgpu_alloc(bytes, ctx->device);
  float *hout = NULL, *hout_dev = NULL;
  MGPU_CUDA(cudaHostAlloc((void **)&hout, bytes, cudaHostAllocMapped));
  MGPU_CUDA(cudaHostGetDevicePointer((void **)&hout_dev, hout, 0));
  float *want = NULL, *tmp = NULL;
  tally *dt = NULL, *ht = NULL;
  MGPU_CUDA(cudaMalloc((void **)&want, bytes));
  MGPU_CUDA(cudaMalloc((void **)&tmp, bytes));
  MGPU_CUDA(cudaMalloc((void **)&dt, sizeof *dt));
  MGPU_CUDA(cudaMallocHost((void **)&ht, sizeof *ht));

  /* Every input starts as the poison, on every rank, before anyone's first call. */
  MGPU_CUDA(cudaMemsetAsync(w->in, 0xFF, bytes, w->stream));
  MGPU_CUDA(cudaStreamSynchronize(w->stream));
  mgpu_barrier(ctx, "case-poisoned");

  verdict v;
  memset(&v, 0, sizeof v);
  mgpu_result_init(&v.r, n);
  v.first_iter = -1;
  for (int k = 0; k < iters; k++) {
    const int iter = 1000 * (case_index + 1) + k;
    const int late = (k % ctx->world) == ctx->rank;
    float *out = late ? hout_dev : (float *)dout.ptr;
    mgpu_barrier(ctx, "iteration"); /* every rank queues what follows within a fraction of a ms */
    mgpu_delay(w->stream, late ? kLeadNs + kLateNs : kLeadNs);
    mgpu_fill_exact_f32(w->in, n, ctx->seed, ctx->rank, iter, w->stream);
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
    expected(ctx, w, team, want, tmp, n, iter);
    compare(w, out, want, n, late, k, dt, ht, &v);
    if (!late) v.r.guard_hits += mgpu_guard_hits(&dout);
  }
  explain(ctx, alone, &v);
  if (v.r.guard_hits > 0 && !v.r.msg[0])
    snprintf(v.r.msg, sizeof v.r.msg, "rank %d: bytes just outside out[0..n) changed: write out[0..n) and nothing else",
             ctx->rank);
  mgpu_record_case(c->name, &v.r, 0);

  MGPU_CUDA(cudaDeviceSynchronize());
  MGPU_CUDA(cudaFree(want));
  MGPU_CUDA(cudaFree(tmp));
  MGPU_CUDA(cudaFree(dt));
  MGPU_CUDA(cudaFreeHost(ht));
  MGPU_CUDA(cudaFreeHost(hout));
  mgpu_free(&dout);
  mgpu_barrier(ctx, "case-done"); /* nobody re-poisons an input that a peer may still read */
}

/* ---- timing ------------------------------------------------------------------------------------ */

typedef struct perf_op {
  world *w;
  nd_args a;
  const float *send;
  float *recv;
  size_t n;
} perf_op;

static void op_yours(void *arg, int iter, cudaStream_t stream) {
  perf_op *p = (perf_op *)arg;
  (void)iter;
  allreduce_device(&p->a, stream);
}

static void op_nccl(void *arg, int iter, cudaStream_t stream) {
  perf_op *p = (perf_op *)arg;
  (void)iter;
  MGPU_NCCL(ncclAllReduce(p->send, p->recv, p->n, ncclFloat, ncclSum, p->w->comm, stream));
}

static void run_perf(mgpu_ctx *ctx, world *w) {
  long long maxn = 1;
  for (int k = 0; k < ctx->nperf_cases; k++)
    if (ctx->perf_cases[k].n > maxn) maxn = ctx->perf_cases[k].n;
  mgpu_buf out = mgpu_alloc(sizeof(float) * (size_t)maxn, ctx->device);
  mgpu_buf send = mgpu_alloc(sizeof(float) * (size_t)maxn, ctx->device);
  mgpu_buf recv = mgpu_alloc(sizeof(float) * (size_t)maxn, ctx->device);
  mgpu_fill_exact_f32(w->in, maxn, ctx->seed, ctx->rank, 900, w->stream);
  mgpu_fill_exact_f32((float *)send.ptr, maxn, ctx->seed, ctx->rank, 900, w->stream);
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
    mgpu_time_pair(ctx, &t, op_yours, &p, op_nccl, &p, w->stream);
  }
  MGPU_CUDA(cudaDeviceSynchronize());
  mgpu_barrier(ctx, "perf-done");

  /* New data through the timed buffers: a kernel that skips work it has seen fails here. */
  const long long n = maxn;
  float *want = NULL, *tmp = NULL;
  tally *dt = NULL, *ht = NULL;
  MGPU_CUDA(cudaMalloc((void **)&want, sizeof(float) * (size_t)n));
  MGPU_CUDA(cudaMalloc((void **)&tmp, sizeof(float) * (size_t)n));
  MGPU_CUDA(cudaMalloc((void **)&dt, sizeof *dt));
  MGPU_CUDA(cudaMallocHost((void **)&ht, sizeof *ht));
  verdict v;
  memset(&v, 0, sizeof v);
  mgpu_result_init(&v.r, n);
  v.first_iter = -1;
  mgpu_poison(&out, w->stream);
  mgpu_fill_exact_f32(w->in, n, ctx->seed, ctx->rank, 901, w->stream);
  MGPU_CUDA(cudaStreamSynchronize(w->stream));
  mgpu_barrier(ctx, "after-timing-filled");
  const nd_args a = args_for(w, (float *)out.ptr, (size_t)n, team_all(w));
  call_learner(w, &a);
  mgpu_wait_or_hang(ctx, w->stream, kHangS, kFn, "the same call passed before the timing");
  expected(ctx, w, team_all(w), want, tmp, n, 901);
  compare(w, (const float *)out.ptr, want, n, 0, 0, dt, ht, &v);
  v.r.guard_hits = mgpu_guard_hits(&out);
  if (v.r.bad + v.r.unwritten > 0)
    snprintf(v.r.msg, sizeof v.r.msg,
             "after-timing: new inputs in the timed buffers gave a wrong result (%lld wrong, %lld unwritten): does "
             "%s skip work it has seen before?",
             v.r.bad, v.r.unwritten, kFn);
  mgpu_record_case("after-timing", &v.r, 0);
  MGPU_CUDA(cudaFree(want));
  MGPU_CUDA(cudaFree(tmp));
  MGPU_CUDA(cudaFree(dt));
  MGPU_CUDA(cudaFreeHost(ht));
  mgpu_free(&out);
  mgpu_free(&send);
  mgpu_free(&recv);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  world w;
  memset(&w, 0, sizeof w);
  setup(&ctx, &w);
  for (int k = 0; k < ctx.ncases; k++) run_case(&ctx, &w, &ctx.cases[k], k);
  if (ctx.perf) run_perf(&ctx, &w);
  teardown(&ctx, &w);
  return mgpu_finish(&ctx);
}
