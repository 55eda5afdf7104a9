/*
 * allreduce_bench.cuh: the driver of module 6's all-reduce exercises (course-owned; a support file
 * of module6/one-shot and module6/two-shot, "../shared/allreduce_bench.cuh").
 *
 * Before including it, a driver includes <nccl.h> and its exercise's header, and defines
 *   AR_FN                                the learner's function's name, a string literal
 *   static void learner_call(const ar_view *v, float *out, long long n, unsigned int epoch,
 *                            cudaStream_t stream);   the learner's call, inside MGPU_LEARNER(...)
 *                                                    (compiled out of the verifier)
 *   static int epochs_for(long long n);   epochs per correctness case of n floats
 * and then returns ar_main(argc, argv) from main.
 *
 * One process per GPU (launcher local). Memory: one symmetric buffer per rank (mgpu_symm_alloc),
 * cut into the rank's input (max n floats), scratch (2 * world * max n floats) and flags
 * (AR_FLAG_WORDS words). The learner gets a view (symm_ar.h) listing a *team*: every rank in
 * rank order ("all"), each rank alone ("solo"), every rank in reverse order ("reversed", two
 * ranks) or the even and the odd ranks as two teams, each in descending order ("split", three
 * ranks or more). Every correctness case runs once per layout; the records are named
 * "<case>" for "all" and "<case>@<layout>" for the others. A solution written for two members
 * fails the solo teams (on any machine) and the split and full teams of three or more.
 *
 * A session is one (case, layout): every rank synchronizes its device, the ranks meet, each rank
 * zeroes its flags, fills its scratch with a NaN and its input with the marker of epoch 0, and
 * the ranks meet again; then epochs 1..E are queued on the rank's stream with no host wait in
 * between, so that the ranks drift apart as far as the learner's synchronization lets them.
 * Epoch e on every member, on `stream`:
 *     [delay]  fill own input with exact values of (seed, rank, iteration)
 *     poison out (0xFF bytes: a NaN no arithmetic produces)      [hog + gate]
 *     the learner's call (epoch e)
 *     fill own input with marker(e)   -- the learner's call has returned: the input is the
 *                                        driver's again, and it is overwritten at once
 *     copy out aside (the epoch's snapshot, on the GPU)
 * Once the session's work is done, the rank hands each epoch's snapshot and its guard count over
 * to its verifier (`verifier: true`, docs/protocol.md §4), which compares every element with the
 * exact sum on the CPU and records the case: the rank never knows another rank's inputs.
 * Inputs are fine exact values (ar_value: 13 significant bits, so half or bfloat16 anywhere on
 * the way changes them; sums exact in float in any order).
 * Markers are integers far from the inputs and 1024 apart, so an output that used a member's
 * input too early (marker(e-1): the owner had not filled it yet) or too late (marker(e): the
 * owner had already returned) says so, and which member it was. Other classes: the member's
 * input of the previous or next epoch, a member missing or added twice, a reduced chunk copied
 * from scratch before it arrived (the scratch NaN, or an earlier epoch's result), out never
 * written (the poison). The first wrong epoch's classes and samples make the case's message.
 *
 * What shifts the ranks against each other (roles by epoch k of a session, member (k / 3) % world):
 *   k % 3 == 1  "ordering": that member waits kDelayNs on the GPU before filling its input. Its
 *               peers that do not wait for its "input ready" signal read marker(k-1); its own
 *               work left on another stream reads its unfilled input.
 *   k % 3 == 2  "stress": beside that member's call, a kernel holds all SMs but one for kHogNs
 *               (a gate keeps the call back until it holds them), so the member's blocks run a
 *               few at a time: a peer that returns without waiting until this member finished
 *               reading its input has it overwritten under the member's later blocks, and a
 *               peer that reads this member's pushed chunks without waiting reads old ones.
 *   k % 3 == 0  nothing: the fast members go straight on into the next epoch.
 * Every wait is bounded: after kHangS seconds a call that has not finished is reported with the
 * team it ran for (mgpu_wait_or_hang); a fault in the learner's kernels is reported the same way.
 *
 * Timing (MGPU_PERF=1): every perf case on the full team, the learner's call against
 * ncclAllReduce (sum, fp32, a communicator of all ranks, the same input and output buffers) with
 * mgpu_time_pair, metric "time". After each size, kAfterTimingEpochs more epochs with new data,
 * continuing the epoch count of the timed calls, are checked into the case "after-timing" (the
 * rank hands over how many epochs the timed calls used, then the snapshots, as above). About one
 * timed call in 16, yours and NCCL's, is probed (ar_probes_*, below): one member changes its
 * input at 32 places before it, and out must follow; the tallies go to "after-timing" too.
 *
 * The rank (mgpu_computes) does everything on the GPU; the verifier (mgpu_verifies, built with
 * -DMGPU_VERIFIER, no GPU) walks the same sessions without a CUDA call, receives, compares and
 * explains. The pieces that module6/fused-norm reuses (setup, sessions, hog, waits, classes,
 * ar_explain) keep working for a driver that is not split.
 */
#ifndef MODULE6_ALLREDUCE_BENCH_CUH
#define MODULE6_ALLREDUCE_BENCH_CUH

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const double kHangS = 10.0;          /* a call not finished after 2 x kHangS hangs */
static const long long kDelayNs = 100000;   /* "ordering" epochs: 100 us before the fill */
static const long long kHogNs = 300000;     /* "stress" epochs: SMs held for 300 us */
static const long long kGateMaxNs = 3000000; /* the gate gives up on the hog after 3 ms */
static const int kHogThreads = 1024;
static const int kHogSmem = 100 * 1024;     /* at most two hog blocks per SM */
static const int kHogFreeSMs = 1;           /* SMs left free of hog blocks (plus what the gate leaves) */
static const int kAfterTimingEpochs = 3;
enum { kMaxEpochs = 64 };

#define AR_OUT_POISON 0xFFFFFFFFu
#define AR_SCRATCH_POISON 0x7FF0DEADu
#define AR_DECOY_NAN 0x7FF0BAD0u /* what the view's entries for non-members point at */

/* ---- exact values on the GPU: the harness's function (mgpu_core.c), checked at start-up ---- */

static __host__ __device__ __forceinline__ uint64_t ar_mix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static __host__ __device__ __forceinline__ float ar_exact(uint64_t key, long long i) {
  const uint64_t h = ar_mix64(key ^ (uint64_t)i);
  const uint32_t hi = (uint32_t)(h >> 32);
  return (float)((int)(((uint64_t)hi * 129u) >> 32) - 64);
}

/* The members' inputs: the harness's fine exact values (mgpu_fine_value_k: the integer above plus
 * a fraction in 64ths, 13 significant bits). Sums of the team's inputs stay exact in float in any
 * order, and an exchange or a sum made in half or bfloat16 changes elements: with plain integers
 * in [-64, 64], which half holds, a two-shot that moved its chunks as half passed. */
static __host__ __device__ __forceinline__ float ar_value(uint64_t key, long long i) {
  const uint64_t h = ar_mix64(key ^ (uint64_t)i);
  return ar_exact(key, i) + (float)(unsigned)(h & 63u) * 0.015625f;
}

/* What a member's input holds between its epochs (see the top of this file). */
static __host__ __device__ __forceinline__ float ar_marker(unsigned int e) {
  return 65536.0f + 1024.0f * (float)(e % 32u);
}

/* ---- driver kernels ------------------------------------------------------------------------ */

static __global__ void k_exact_probe(uint64_t key, float *o, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    o[i] = ar_exact(key, i);
    o[n + i] = ar_value(key, i);
  }
}

static __device__ __forceinline__ unsigned long long ar_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __global__ void k_fill_f32(float *p, long long n, float v) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = v;
}

static __global__ void k_fill_exact(float *p, long long n, uint64_t key) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = ar_exact(key, i);
}

/* A member's input: fine exact values (ar_value). */
static __global__ void k_fill_value(float *p, long long n, uint64_t key) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = ar_value(key, i);
}

static __global__ void k_fill_u32(unsigned int *p, long long n, unsigned int v) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = v;
}

/* Holds an SM slot (1024 threads, 100 KiB of shared memory) for ns; counts itself in. */
static __global__ void k_hog(unsigned int *started, long long ns) {
  extern __shared__ unsigned char hog_smem[];
  if (threadIdx.x == 0) {
    hog_smem[0] = 1;
    atomicAdd(started, 1u);
  }
  const unsigned long long t0 = ar_globaltimer();
  while (ar_globaltimer() - t0 < (unsigned long long)ns) __nanosleep(2000);
}

/* Holds `stream` back until every hog block runs (or max_ns passed). */
static __global__ void k_gate(const unsigned int *started, unsigned int target, long long max_ns) {
  const unsigned long long t0 = ar_globaltimer();
  const volatile unsigned int *s = started;
  while (*s < target && ar_globaltimer() - t0 < (unsigned long long)max_ns) __nanosleep(500);
}

/* ---- the comparison ------------------------------------------------------------------------ */

enum {
  C_OK,
  C_UNWRITTEN,  /* still the driver's poison */
  C_SCRATCH,    /* the scratch NaN */
  C_DECOY,      /* the NaN behind the view's entries for non-members */
  C_NAN,        /* another NaN */
  C_AFTER,      /* used a member's input after that member had returned (marker(e)) */
  C_BEFORE,     /* used a member's input before its owner filled it (marker(e-1)) */
  C_NEXT,       /* used a member's input of epoch e+1 */
  C_PREV,       /* used a member's input of epoch e-1 */
  C_OLD_RESULT, /* the whole result of epoch e-1 or e-2 */
  C_MISSING,    /* a member's input left out */
  C_DOUBLE,     /* a member's input added twice */
  C_OTHER,
  C_COUNT
};

typedef struct ar_keys {
  int world;
  int has_prev, has_prev2, has_next;
  float marker_now, marker_before;
  unsigned long long cur[AR_MAX_RANKS], prev[AR_MAX_RANKS], prev2[AR_MAX_RANKS], next[AR_MAX_RANKS];
} ar_keys;

typedef struct ar_sample {
  long long i;
  unsigned int got;
  int cls, member;
} ar_sample;

typedef struct ar_stats {
  unsigned long long bad, unwritten;
  unsigned long long cls[C_COUNT];
  unsigned long long first, unw_min, unw_max, scr_min, scr_max;
  unsigned int nsample;
  ar_sample sample[8];
} ar_stats;

static __host__ __device__ __forceinline__ unsigned int ar_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  unsigned int u;
  memcpy(&u, &f, 4);
  return u;
#endif
}

/* What a wrong element shows (C_*), and which member's input when one explains it. */
static __host__ __device__ int classify(float got, float want, long long i, const ar_keys &k, int *member) {
  const unsigned int gb = ar_bits(got);
  *member = -1;
  if (gb == AR_OUT_POISON) return C_UNWRITTEN;
  if (gb == AR_SCRATCH_POISON) return C_SCRATCH;
  if (gb == AR_DECOY_NAN) return C_DECOY;
  if (got != got) return C_NAN;
  const double d = (double)got - (double)want;
  for (int m = 0; m < k.world; m++) {
    const double v = ar_value(k.cur[m], i);
    *member = m;
    if (d == (double)k.marker_now - v) return C_AFTER;
    if (d == (double)k.marker_before - v) return C_BEFORE;
  }
  for (int m = 0; m < k.world; m++) {
    const double v = ar_value(k.cur[m], i);
    *member = m;
    if (k.has_next && d == (double)ar_value(k.next[m], i) - v) return C_NEXT;
    if (k.has_prev && d == (double)ar_value(k.prev[m], i) - v) return C_PREV;
  }
  *member = -1;
  float p1 = 0.0f, p2 = 0.0f;
  for (int m = 0; m < k.world; m++) {
    if (k.has_prev) p1 += ar_value(k.prev[m], i);
    if (k.has_prev2) p2 += ar_value(k.prev2[m], i);
  }
  if ((k.has_prev && got == p1) || (k.has_prev2 && got == p2)) return C_OLD_RESULT;
  for (int m = 0; m < k.world; m++) {
    const double v = ar_value(k.cur[m], i);
    *member = m;
    if (v != 0.0 && d == -v) return C_MISSING;
    if (v != 0.0 && d == v) return C_DOUBLE;
  }
  *member = -1;
  return C_OTHER;
}

/* The verifier's comparison of one epoch's out, on the CPU: every element against the exact sum
 * of the team's inputs (the same float additions in member order as the fill's values, so exact).
 * full: every wrong element is classified, for the session's first wrong epoch, whose classes and
 * samples explain the case; otherwise wrong elements are only counted (bad, unwritten), which is
 * all the tally takes from later epochs. Samples: the first element of each class found, the
 * most frequent classes first, then more of the first wrong elements, at most 8 in all. */
static void ar_compare_host(const float *out, long long n, const ar_keys *k, int full, ar_stats *st) {
  memset(st, 0, sizeof *st);
  st->first = st->unw_min = st->scr_min = ~0ULL;
  ar_sample firsts[C_COUNT], more[8];
  int has_first[C_COUNT] = {0}, nmore = 0;
  for (long long i = 0; i < n; i++) {
    float want = 0.0f;
    for (int m = 0; m < k->world; m++) want += ar_value(k->cur[m], i);
    const float got = out[i];
    if (got == want) continue;
    const unsigned int gb = ar_bits(got);
    if (st->first == ~0ULL) st->first = (unsigned long long)i;
    if (!full) {
      if (gb == AR_OUT_POISON)
        st->unwritten++;
      else
        st->bad++;
      continue;
    }
    int member;
    const int cls = classify(got, want, i, *k, &member);
    st->cls[cls]++;
    if (cls == C_UNWRITTEN) {
      st->unwritten++;
      if (st->unw_min == ~0ULL) st->unw_min = (unsigned long long)i;
      st->unw_max = (unsigned long long)i;
    } else {
      st->bad++;
      if (cls == C_SCRATCH) {
        if (st->scr_min == ~0ULL) st->scr_min = (unsigned long long)i;
        st->scr_max = (unsigned long long)i;
      }
    }
    ar_sample x;
    x.i = i;
    x.got = gb;
    x.cls = cls;
    x.member = member;
    if (!has_first[cls]) {
      firsts[cls] = x;
      has_first[cls] = 1;
    } else if (nmore < 8) {
      more[nmore++] = x;
    }
  }
  for (;;) { /* the classes' first elements, the most frequent class first */
    int best = -1;
    for (int c = 0; c < C_COUNT; c++)
      if (has_first[c] && (best < 0 || st->cls[c] > st->cls[best])) best = c;
    if (best < 0 || st->nsample >= 8) break;
    st->sample[st->nsample++] = firsts[best];
    has_first[best] = 0;
  }
  for (int x = 0; x < nmore && st->nsample < 8; x++) st->sample[st->nsample++] = more[x];
}

/* ---- state ------------------------------------------------------------------------------------ */

typedef struct ar_state {
  mgpu_ctx *ctx;
  mgpu_symm symm;
  size_t in_off, scratch_off, flags_off; /* byte offsets inside every rank's buffer */
  long long max_n, scratch_floats;
  cudaStream_t stream, hog_stream;
  cudaEvent_t hog_ev;
  unsigned int *hog_started; /* device counter of hog blocks that ran, over the whole run */
  unsigned int hog_target;
  int hog_blocks;
  /* ar_run_epochs' outputs: the rank's snapshots of out (d_snap, snap_floats floats, one n-float
   * slot per epoch of a session) and the host buffer (max_n floats) each one is handed over
   * from (rank, pinned) or received into (verifier). */
  float *d_snap, *h_out;
  long long snap_floats;
  int sessions;
  char *decoy; /* local memory laid out like a rank's part: what non-members' view entries point at */
} ar_state;

typedef struct ar_team {
  const char *layout; /* "all", "solo", "reversed", "split" */
  int world, me;
  int member[AR_MAX_RANKS]; /* global ranks, in team order */
  char desc[128];           /* "rank 1 = member 0 of a team of 2 (ranks 1,0)" */
} ar_team;

/* The call in progress (set while epochs are queued), for messages about faults; the last one. */
static const ar_team *g_ar_team;
static long long g_ar_n;
static ar_team g_ar_last;

/* Errors that mean a kernel failed while it ran (sticky: every later call returns them). */
static int ar_is_fault(cudaError_t e) {
  switch (e) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchFailure:
  case cudaErrorMisalignedAddress:
  case cudaErrorIllegalInstruction:
  case cudaErrorInvalidPc:
  case cudaErrorHardwareStackError:
  case cudaErrorAssert:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorLaunchTimeout:
    return 1;
  default:
    return 0;
  }
}

static void ar_report_fault(cudaError_t e, int line) {
  char msg[700];
  snprintf(msg, sizeof msg,
           "%s failed on the GPU: %s (%s), in a call for %s, n = %lld. Does the code index past n, past the view's "
           "scratch_floats or AR_FLAG_WORDS, or use a pointer from an earlier call?",
           AR_FN, cudaGetErrorName(e), cudaGetErrorString(e), g_ar_team ? g_ar_team->desc : "the full team", g_ar_n);
  mgpu_fail("learner", AR_FN, __FILE__, line, (long)e, msg);
}

/* Checks a call the driver makes while the learner's kernels may be running: a fault there is
 * the learner's kernel's (it surfaces at whichever call comes next), named with the team. */
static void ar_check(cudaError_t e, const char *call, int line) {
  if (e == cudaSuccess) return;
  if (g_ar_team && ar_is_fault(e)) ar_report_fault(e, line);
  mgpu_check_cuda(e, call, __FILE__, line);
}
#define AR_CUDA(call) ar_check((call), #call, __LINE__)
#define AR_KERNEL() ar_check(cudaGetLastError(), "kernel launch", __LINE__)

static void ar_expect_no_pending_error(void) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess && ar_is_fault(e)) ar_report_fault(e, __LINE__);
  if (e != cudaSuccess) {
    char msg[300];
    snprintf(msg, sizeof msg,
             "%s left a CUDA error unchecked: %s (%s). Wrap every CUDA call in MGPU_CUDA(...) and put MGPU_KERNEL() "
             "after each launch.",
             AR_FN, cudaGetErrorName(e), cudaGetErrorString(e));
    mgpu_fail("learner", AR_FN, __FILE__, __LINE__, (long)e, msg);
  }
}

static int ar_grid(long long n) {
  long long g = (n + 1023) / 1024;
  if (g < 1) g = 1;
  if (g > 1024) g = 1024;
  return (int)g;
}

static ar_team ar_make_team(const mgpu_ctx *ctx, const char *layout) {
  ar_team t;
  memset(&t, 0, sizeof t);
  t.layout = layout;
  const int W = ctx->world, r = ctx->rank;
  if (strcmp(layout, "solo") == 0) {
    t.member[t.world++] = r;
  } else if (strcmp(layout, "reversed") == 0) {
    for (int g = W - 1; g >= 0; g--) t.member[t.world++] = g;
  } else if (strcmp(layout, "split") == 0) {
    for (int g = W - 1; g >= 0; g--)
      if ((g & 1) == (r & 1)) t.member[t.world++] = g;
  } else {
    for (int g = 0; g < W; g++) t.member[t.world++] = g;
  }
  for (int m = 0; m < t.world; m++)
    if (t.member[m] == r) t.me = m;
  int len = snprintf(t.desc, sizeof t.desc, "rank %d = member %d of a team of %d (ranks ", r, t.me, t.world);
  for (int m = 0; m < t.world && len < (int)sizeof t.desc - 8; m++)
    len += snprintf(t.desc + len, sizeof t.desc - (size_t)len, m ? ",%d" : "%d", t.member[m]);
  snprintf(t.desc + len, sizeof t.desc - (size_t)len, ")");
  return t;
}

static char *ar_base(const ar_state *s, int g) { return (char *)s->symm.ptr[g]; }
static float *ar_in(const ar_state *s, int g) { return (float *)(ar_base(s, g) + s->in_off); }
static float *ar_scratch(const ar_state *s, int g) { return (float *)(ar_base(s, g) + s->scratch_off); }
static unsigned int *ar_flags(const ar_state *s, int g) { return (unsigned int *)(ar_base(s, g) + s->flags_off); }

static ar_view ar_view_for(const ar_state *s, const ar_team *t) {
  ar_view v;
  memset(&v, 0, sizeof v);
  for (int p = t->world; p < AR_MAX_RANKS; p++) { /* non-members: the decoy */
    v.in[p] = (const float *)(s->decoy + s->in_off);
    v.scratch[p] = (float *)(s->decoy + s->scratch_off);
    v.flags[p] = (unsigned int *)(s->decoy + s->flags_off);
  }
  v.rank = t->me;
  v.world = t->world;
  v.scratch_floats = s->scratch_floats;
  for (int m = 0; m < t->world; m++) {
    v.in[m] = ar_in(s, t->member[m]);
    v.scratch[m] = ar_scratch(s, t->member[m]);
    v.flags[m] = ar_flags(s, t->member[m]);
  }
  return v;
}

/* Waits for `stream`: kHangS watching for a fault in the learner's kernels (reported with the team
 * the call ran for), then up to kHangS more in mgpu_wait_or_hang, which reports a hang. */
static void ar_wait(ar_state *s, const ar_team *t, long long n) {
  const double t0 = mgpu_now_us();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s->stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      g_ar_team = t;
      g_ar_n = n;
      if (ar_is_fault(e)) ar_report_fault(e, __LINE__);
      mgpu_check_cuda(e, "cudaStreamQuery (after the learner's calls)", __FILE__, __LINE__);
    }
    if (mgpu_now_us() - t0 > kHangS * 1e6) break;
    usleep(200);
  }
  char hint[600];
  snprintf(hint, sizeof hint,
           "it was called for %s, n = %lld. Is a wait looking for a signal nobody sends: from a member outside "
           "0 .. world-1 (a fixed partner such as rank ^ 1; the view points non-members at memory nobody signals), a "
           "count of more blocks than the sender launched, a flag compared with a constant instead of the epoch, or a "
           "flag read with plain loads (the compiler may read it once; use acquire loads at system scope)?",
           t->desc, n);
  mgpu_wait_or_hang(s->ctx, s->stream, kHangS, AR_FN, hint);
}

/* Collective: every rank's work is done, then each rank resets its own part for a new session. */
static void ar_begin_session(ar_state *s, const ar_team *t, long long n) {
  mgpu_ctx *ctx = s->ctx;
  /* Work of the last call left on other streams ends here: a fault in it is the learner's. */
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess && ar_is_fault(e) && s->sessions > 0) {
    g_ar_team = &g_ar_last;
    ar_report_fault(e, __LINE__);
  }
  mgpu_check_cuda(e, "cudaDeviceSynchronize", __FILE__, __LINE__);
  mgpu_barrier(ctx, "m6-quiet");
  const int g = ctx->rank;
  long long sf = 2LL * t->world * n;
  if (sf > s->scratch_floats) sf = s->scratch_floats;
  k_fill_f32<<<ar_grid(s->max_n), 256, 0, s->stream>>>(ar_in(s, g), s->max_n, ar_marker(0));
  MGPU_KERNEL();
  k_fill_u32<<<ar_grid(sf), 256, 0, s->stream>>>((unsigned int *)ar_scratch(s, g), sf, AR_SCRATCH_POISON);
  MGPU_KERNEL();
  MGPU_CUDA(cudaMemsetAsync(ar_flags(s, g), 0, sizeof(unsigned int) * AR_FLAG_WORDS, s->stream));
  k_fill_u32<<<ar_grid(s->max_n), 256, 0, s->stream>>>((unsigned int *)(s->decoy + s->in_off), s->max_n, AR_DECOY_NAN);
  MGPU_KERNEL();
  k_fill_u32<<<ar_grid(sf), 256, 0, s->stream>>>((unsigned int *)(s->decoy + s->scratch_off), sf, AR_DECOY_NAN);
  MGPU_KERNEL();
  MGPU_CUDA(cudaMemsetAsync(s->decoy + s->flags_off, 0, sizeof(unsigned int) * AR_FLAG_WORDS, s->stream));
  MGPU_CUDA(cudaStreamSynchronize(s->stream));
  mgpu_barrier(ctx, "m6-ready");
}

static void ar_hog(ar_state *s) {
  if (s->hog_blocks <= 0) return;
  AR_CUDA(cudaEventRecord(s->hog_ev, s->stream));
  AR_CUDA(cudaStreamWaitEvent(s->hog_stream, s->hog_ev, 0));
  k_hog<<<s->hog_blocks, kHogThreads, kHogSmem, s->hog_stream>>>(s->hog_started, kHogNs);
  AR_KERNEL();
  s->hog_target += (unsigned int)s->hog_blocks;
  k_gate<<<1, 32, 0, s->stream>>>(s->hog_started, s->hog_target, kGateMaxNs);
  AR_KERNEL();
}

/* One session's results, gathered over its epochs. */
typedef struct ar_tally {
  mgpu_result r;
  int epochs, bad_epochs;
  unsigned int first_epoch; /* learner's epoch number of the first wrong epoch; 0 when none */
  int first_iter;
  ar_stats first; /* that epoch's stats */
  int nsamples;   /* its samples, by index */
  ar_sample samples[8];
} ar_tally;

static void ar_tally_init(ar_tally *a, long long n) {
  memset(a, 0, sizeof *a);
  mgpu_result_init(&a->r, n);
}

static void ar_fmt_float(char *dst, size_t len, unsigned int bits) {
  float f;
  memcpy(&f, &bits, 4);
  if (bits == AR_OUT_POISON)
    snprintf(dst, len, "NaN(poison)");
  else if (bits == AR_SCRATCH_POISON)
    snprintf(dst, len, "NaN(scratch)");
  else
    snprintf(dst, len, "%.9g", f);
}

/* The keys the comparison of epoch j (learner epoch e, iteration iter) of `count` needs: every
 * member's inputs of this iteration and its neighbours, and the markers. The verifier's only:
 * they are other ranks' inputs. */
static ar_keys ar_keys_for(const mgpu_ctx *ctx, const ar_team *t, int iter, unsigned int e, int j, int count) {
  ar_keys keys;
  memset(&keys, 0, sizeof keys);
  keys.world = t->world;
  keys.has_prev = j >= 1;
  keys.has_prev2 = j >= 2;
  keys.has_next = j + 1 < count;
  keys.marker_now = ar_marker(e);
  keys.marker_before = ar_marker(e - 1);
  for (int m = 0; m < t->world; m++) {
    keys.cur[m] = mgpu_exact_key(ctx->seed, t->member[m], iter);
    keys.prev[m] = mgpu_exact_key(ctx->seed, t->member[m], iter - 1);
    keys.prev2[m] = mgpu_exact_key(ctx->seed, t->member[m], iter - 2);
    keys.next[m] = mgpu_exact_key(ctx->seed, t->member[m], iter + 1);
  }
  return keys;
}

/* Adds epoch j's comparison (learner epoch first_epoch + j) to *a; the first wrong epoch keeps its
 * stats and samples (with the sums they should have been) for ar_explain. */
static void ar_tally_epoch(const mgpu_ctx *ctx, const ar_team *t, long long n, unsigned int first_epoch, int j,
                           int iter_base, const ar_stats *st, ar_tally *a) {
  a->epochs++;
  a->r.checked += n;
  a->r.bad += (long long)st->bad;
  a->r.unwritten += (long long)st->unwritten;
  if (st->bad + st->unwritten == 0) return;
  a->bad_epochs++;
  if (a->first_epoch) return;
  a->first_epoch = first_epoch + (unsigned int)j;
  a->first_iter = iter_base + (int)a->first_epoch;
  a->first = *st;
  ar_sample sm[8];
  const int ns = st->nsample < 8 ? (int)st->nsample : 8;
  memcpy(sm, st->sample, sizeof(ar_sample) * (size_t)ns);
  for (int x = 1; x < ns; x++)
    for (int y = x; y > 0 && sm[y].i < sm[y - 1].i; y--) {
      ar_sample tmp = sm[y];
      sm[y] = sm[y - 1];
      sm[y - 1] = tmp;
    }
  a->nsamples = ns;
  memcpy(a->samples, sm, sizeof sm);
  a->r.nfirst = 0;
  for (int x = 0; x < ns; x++) {
    mgpu_mismatch *mm = &a->r.first[a->r.nfirst++];
    float want = 0.0f;
    for (int m = 0; m < t->world; m++) want += mgpu_fine_value(ctx->seed, t->member[m], a->first_iter, sm[x].i);
    mm->i = sm[x].i;
    ar_fmt_float(mm->got, sizeof mm->got, sm[x].got);
    snprintf(mm->want, sizeof mm->want, "%.9g", want);
  }
}

/* Epochs first_epoch .. first_epoch + count - 1 of a session named `name`. The rank queues them
 * (out copied aside after each), waits, and hands each epoch's out over as "<name>/<j>"; the
 * verifier receives each one, compares it and adds it to *a. Both take the same count. */
static void ar_run_epochs(ar_state *s, const ar_team *t, const ar_view *v, const mgpu_buf *out, long long n,
                          unsigned int first_epoch, int count, int iter_base, int roles, ar_tally *a, const char *name) {
  mgpu_ctx *ctx = s->ctx;
  const int g = ctx->rank;
  const size_t bytes = sizeof(float) * (size_t)n;
  if (count > kMaxEpochs) count = kMaxEpochs;
  if (mgpu_computes(ctx)) {
    if ((long long)count * n > s->snap_floats)
      mgpu_fail("driver", "ar_run_epochs", __FILE__, __LINE__, 0, "the snapshots of out do not fit (a course bug)");
    g_ar_team = t;
    g_ar_n = n;
    for (int j = 0; j < count; j++) {
      const int k = j + 1;
      const unsigned int e = first_epoch + (unsigned int)j;
      const int iter = iter_base + (int)e;
      const int who = (k / 3) % t->world;
      const int ordering = roles && k % 3 == 1 && who == t->me;
      const int stress = roles && k % 3 == 2 && who == t->me && t->world > 1;
      if (ordering) mgpu_delay(s->stream, kDelayNs);
      k_fill_value<<<ar_grid(n), 256, 0, s->stream>>>(ar_in(s, g), n, mgpu_exact_key(ctx->seed, g, iter));
      AR_KERNEL();
      AR_CUDA(cudaMemsetAsync(out->ptr, 0xFF, bytes, s->stream));
      if (stress) ar_hog(s);
      learner_call(v, (float *)out->ptr, n, e, s->stream);
      ar_expect_no_pending_error();
      k_fill_f32<<<ar_grid(n), 256, 0, s->stream>>>(ar_in(s, g), n, ar_marker(e));
      AR_KERNEL();
      AR_CUDA(cudaMemcpyAsync(s->d_snap + (size_t)j * (size_t)n, out->ptr, bytes, cudaMemcpyDeviceToDevice, s->stream));
    }
    ar_wait(s, t, n);
    AR_CUDA(cudaStreamSynchronize(s->hog_stream));
    g_ar_last = *t;
    g_ar_team = NULL;
  }
  for (int j = 0; j < count; j++) {
    char tag[128];
    if (mgpu_computes(ctx))
      MGPU_CUDA(cudaMemcpy(s->h_out, s->d_snap + (size_t)j * (size_t)n, bytes, cudaMemcpyDeviceToHost));
    snprintf(tag, sizeof tag, "%s/%d", name, j);
    if (!mgpu_hand_over(ctx, tag, s->h_out, bytes)) continue;
    const unsigned int e = first_epoch + (unsigned int)j;
    const int iter = iter_base + (int)e;
    const ar_keys keys = ar_keys_for(ctx, t, iter, e, j, count);
    ar_stats st;
    ar_compare_host(s->h_out, n, &keys, a->first_epoch == 0, &st);
    ar_tally_epoch(ctx, t, n, first_epoch, j, iter_base, &st, a);
  }
}

static const char *ar_member_name(const ar_team *t, int m, char *buf, size_t len) {
  if (m < 0 || m >= t->world)
    snprintf(buf, len, "a member");
  else if (m == t->me)
    snprintf(buf, len, "member %d (this rank itself)", m);
  else
    snprintf(buf, len, "member %d (rank %d)", m, t->member[m]);
  return buf;
}

/* What each member's input held when a wrong element was summed, found on the host for one
 * element when no single member explains it: state 0 this epoch's input, 1 marker(e-1) (not
 * filled yet), 2 marker(e) (its owner had returned), 3 the previous epoch's input, 4 the next
 * epoch's. Tries every combination (5^world, at most 390625) and keeps one with the fewest
 * members off. Returns 0 when none adds up to `got`. */
enum { kStates = 5 };
static int ar_decode(const mgpu_ctx *ctx, const ar_team *t, int iter, unsigned int e, long long i, float got,
                     int *state) {
  double val[AR_MAX_RANKS][kStates];
  for (int m = 0; m < t->world; m++) {
    val[m][0] = mgpu_fine_value(ctx->seed, t->member[m], iter, i);
    val[m][1] = ar_marker(e - 1);
    val[m][2] = ar_marker(e);
    val[m][3] = mgpu_fine_value(ctx->seed, t->member[m], iter - 1, i);
    val[m][4] = mgpu_fine_value(ctx->seed, t->member[m], iter + 1, i);
  }
  long long combos = 1;
  for (int m = 0; m < t->world; m++) combos *= kStates;
  int best = t->world + 1;
  for (long long c = 0; c < combos; c++) {
    long long x = c;
    double sum = 0.0;
    int off = 0, st[AR_MAX_RANKS];
    for (int m = 0; m < t->world; m++) {
      st[m] = (int)(x % kStates);
      x /= kStates;
      sum += val[m][st[m]];
      off += st[m] != 0;
    }
    if (sum == (double)got && off > 0 && off < best) {
      best = off;
      memcpy(state, st, sizeof(int) * (size_t)t->world);
    }
  }
  return best <= t->world;
}

/* Appends "members 0 (this rank itself), 2 (rank 5)" for the members in state `want`. */
static int ar_list_members(const ar_team *t, const int *state, int want, char *dst, size_t len) {
  int count = 0;
  size_t used = 0;
  dst[0] = 0;
  for (int m = 0; m < t->world && used + 32 < len; m++) {
    if (state[m] != want) continue;
    if (m == t->me)
      used += (size_t)snprintf(dst + used, len - used, "%s%d (this rank)", count ? ", " : "", m);
    else
      used += (size_t)snprintf(dst + used, len - used, "%s%d (rank %d)", count ? ", " : "", m, t->member[m]);
    count++;
  }
  return count;
}

/* Whether got is off the exact sum of element i by no more than roundings to half or bfloat16 of
 * the members' inputs and of the sum (relative 2^-8 each) would make it. */
static int ar_rounded(const mgpu_ctx *ctx, const ar_team *t, int iter, long long i, float got) {
  double want = 0.0, mag = 0.0;
  for (int m = 0; m < t->world; m++) {
    const double x = mgpu_fine_value(ctx->seed, t->member[m], iter, i);
    want += x;
    mag += fabs(x);
  }
  const double d = fabs((double)got - want);
  return got == got && d > 0.0 && d <= (mag + fabs(want)) * 0.00390625;
}

/* The case message: what the first wrong epoch shows, in words. */
static void ar_explain(const mgpu_ctx *ctx, const ar_team *t, long long n, ar_tally *a) {
  mgpu_result *r = &a->r;
  if (!a->first_epoch) {
    if (r->guard_hits)
      snprintf(r->msg, sizeof r->msg, "%s, n = %lld: %lld byte(s) written outside out[0..n): write out[0..n) and nothing else",
               t->desc, n, r->guard_hits);
    return;
  }
  const ar_stats *st = &a->first;
  int cls = C_OTHER;
  unsigned long long most = 0;
  for (int c = 1; c < C_COUNT; c++)
    if (st->cls[c] > most) {
      most = st->cls[c];
      cls = c;
    }
  long long at = (long long)st->first;
  int member = -1;
  unsigned int got_bits = 0;
  int have = 0;
  for (int x = a->nsamples - 1; x >= 0; x--)
    if (a->samples[x].cls == cls) {
      at = a->samples[x].i;
      member = a->samples[x].member;
      got_bits = a->samples[x].got;
      have = 1;
    }
  char who[64];
  ar_member_name(t, member, who, sizeof who);
  const int self = member == t->me;
  static const char *not_stream = " (or work of yours not queued on `stream`)";
  char what[420];
  switch (cls) {
  case C_UNWRITTEN:
    if (st->unw_max == (unsigned long long)(n - 1) && st->unw_max - st->unw_min + 1 == st->unwritten && st->unw_min > 0)
      snprintf(what, sizeof what,
               "the last %llu element(s), from index %llu on, were never written (still the driver's poison): does the last "
               "chunk reach n (n %% world = %lld)? Every element must belong to exactly one chunk",
               st->unwritten, st->unw_min, n % t->world);
    else
      snprintf(what, sizeof what,
               "%llu element(s) of out, first at %llu, still held the driver's poison when the work queued on `stream` was "
               "done: write every element, and queue all of the work on `stream` (the driver reads out there right after "
               "your function returns)",
               st->unwritten, st->unw_min);
    break;
  case C_SCRATCH:
    if (st->scr_max == (unsigned long long)(n - 1) && st->scr_max - st->scr_min + 1 == st->cls[C_SCRATCH] &&
        a->bad_epochs == a->epochs)
      snprintf(what, sizeof what,
               "the last %llu element(s), from index %llu on, came out of scratch where no member ever stored them (the "
               "scratch NaN, in every epoch): does the last chunk reach n (n %% world = %lld)? Every element must belong "
               "to exactly one chunk",
               st->cls[C_SCRATCH], st->scr_min, n % t->world);
    else
      snprintf(what, sizeof what,
               "out[%lld] is the NaN the scratch areas hold at the start: a reduced chunk was read from scratch before its "
               "owner's stores arrived. Wait for the owner's all-gather signal (acquire, system scope); the owner signals "
               "after its stores (release, system scope)",
               at);
    break;
  case C_AFTER:
    if (self)
      snprintf(what, sizeof what,
               "out[%lld] used this rank's own input after the call had returned and the driver had overwritten it: work was "
               "still running after your function returned. Queue all of it on `stream`",
               at);
    else
      snprintf(what, sizeof what,
               "out[%lld] used the input of %s after that member had already returned from this epoch and its driver had "
               "overwritten it: a member must not return before every member has finished reading its input (signal \"done "
               "reading\" with release, wait for everyone's with acquire)%s",
               at, who, not_stream);
    break;
  case C_BEFORE:
    if (self)
      snprintf(what, sizeof what,
               "out[%lld] used this rank's own input before the driver had filled it for this epoch: work on another stream "
               "does not wait for what the driver queued on `stream` before your call. Queue all of it on `stream`",
               at);
    else
      snprintf(what, sizeof what,
               "out[%lld] used the input of %s before that member's driver had filled it for this epoch: wait until every "
               "member has signalled that this epoch's input is ready (its release store, your acquire load at system "
               "scope) before reading it%s",
               at, who, not_stream);
    break;
  case C_NEXT:
    snprintf(what, sizeof what,
             "out[%lld] used the input %s had for the next epoch: that member had already returned from this one and "
             "its driver had refilled its input before this rank finished reading it. A member must not return before "
             "every member has finished reading its input%s",
             at, who, not_stream);
    break;
  case C_PREV:
    snprintf(what, sizeof what,
             "out[%lld] used the input %s had in the previous epoch, before that member's driver had filled it for this "
             "one: a wait let this rank in too early. Compare flags with this call's epoch, not with a constant%s",
             at, who, not_stream);
    break;
  case C_OLD_RESULT:
    snprintf(what, sizeof what,
             "out[%lld] holds the result of an earlier epoch: a reduced chunk was copied out of scratch before this epoch's "
             "arrived. Wait for every owner's all-gather signal (acquire at system scope); owners signal after their "
             "stores (release at system scope)%s",
             at, not_stream);
    break;
  case C_MISSING:
    snprintf(what, sizeof what,
             "out[%lld] lacks the input of %s: add every member p = 0 .. world-1 of the view (this team has %d), each once",
             at, who, t->world);
    break;
  case C_DOUBLE:
    snprintf(what, sizeof what, "out[%lld] has the input of %s added twice: add every member p = 0 .. world-1 once", at,
             who);
    break;
  case C_DECOY:
    snprintf(what, sizeof what,
             "out[%lld] is the NaN behind the view's entries for members p >= world: the code read a member outside 0 .. "
             "world-1 (this team has %d; a fixed partner such as rank ^ 1, or a loop to a constant?)",
             at, t->world);
    break;
  case C_NAN:
    snprintf(what, sizeof what,
             "out[%lld] is a NaN: a NaN was added in, from a member outside 0 .. world-1 (the view points those at "
             "NaN) or from memory that holds no input",
             at);
    break;
  default: {
    float got;
    memcpy(&got, &got_bits, 4);
    int state[AR_MAX_RANKS];
    char early[96], late[96], prev[96], next[96];
    if (have && ar_decode(ctx, t, a->first_iter, a->first_epoch, at, got, state)) {
      const int ne = ar_list_members(t, state, 1, early, sizeof early);
      const int nl = ar_list_members(t, state, 2, late, sizeof late);
      const int np = ar_list_members(t, state, 3, prev, sizeof prev);
      const int nn = ar_list_members(t, state, 4, next, sizeof next);
      const int own = state[t->me] != 0;
      snprintf(what, sizeof what,
               "out[%lld] adds up only if several members' inputs were read at the wrong time, for instance:"
               "%s%s%s%s%s%s%s%s.%s",
               at, ne ? " before their fill, members " : "", early, nl ? "; after their owners had already returned, members " : "",
               late, np ? "; from the previous epoch, members " : "", prev, nn ? "; from the next epoch, members " : "",
               next,
               own ? " This rank's own input may be among them: queue all of the work on `stream`"
                   : " Wait for every member's \"ready\" before reading, and for everyone's \"done reading\" before "
                     "returning (and queue all of the work on `stream`)");
    } else if (have && ar_rounded(ctx, t, a->first_iter, at, got)) {
      snprintf(what, sizeof what,
               "out[%lld] is within a rounding of the exact sum, but not it: the data passed through a type narrower than "
               "float on the way (half or bfloat16 to halve the bytes?), or was added in one. The inputs have 13 "
               "significant bits, half keeps 11: move and add them as float",
               at);
    } else {
      snprintf(what, sizeof what,
               "out[%lld] is not the sum of the team's inputs (see the mismatches): inputs were read at the wrong time, or "
               "a wrong element was added%s",
               at, not_stream);
    }
    break;
  }
  }
  snprintf(r->msg, sizeof r->msg, "%s, n = %lld: %d of %d epochs wrong, first epoch %u: %s.", t->desc, n, a->bad_epochs,
           a->epochs, a->first_epoch, what);
}

/* ---- the correctness sessions ------------------------------------------------------------------ */

/* The record's name: "<case>" for the full team, "<case>@<layout>" for the others. */
static void ar_case_name(char *dst, size_t len, const mgpu_case *c, const char *layout) {
  if (strcmp(layout, "all") == 0)
    snprintf(dst, len, "%s", c->name);
  else
    snprintf(dst, len, "%s@%s", c->name, layout);
}

/* One (case, layout). Hand-overs: "<name>/<j>" per epoch (ar_run_epochs), then "<name>/guards". */
static void ar_run_case(ar_state *s, const mgpu_case *c, const char *layout) {
  mgpu_ctx *ctx = s->ctx;
  const long long n = c->n;
  const ar_team t = ar_make_team(ctx, layout);
  char name[96], tag[128];
  ar_case_name(name, sizeof name, c, layout);
  ar_view v;
  mgpu_buf out;
  memset(&v, 0, sizeof v);
  memset(&out, 0, sizeof out);
  if (mgpu_computes(ctx)) {
    ar_begin_session(s, &t, n);
    v = ar_view_for(s, &t);
    out = mgpu_alloc(sizeof(float) * (size_t)n, ctx->device);
  }
  ar_tally a;
  ar_tally_init(&a, n);
  const int sess = ++s->sessions;
  ar_run_epochs(s, &t, &v, &out, n, 1, epochs_for(n), sess * 1000, 1, &a, name);
  long long hits = 0;
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(&out);
  snprintf(tag, sizeof tag, "%s/guards", name);
  mgpu_hand_over(ctx, tag, &hits, sizeof hits);
  if (mgpu_verifies(ctx)) {
    a.r.n = n;
    a.r.guard_hits = hits;
    ar_explain(ctx, &t, n, &a);
    mgpu_record_case(name, &a.r, 0);
  }
  if (mgpu_computes(ctx)) mgpu_free(&out);
}

/* ---- timing ------------------------------------------------------------------------------------ */

#define TP_KERNEL() AR_KERNEL()
#include "timed_probes.cuh"

/* Both sides: hands the tallies over as "<name>/probes"; in the verifier, a baseline that missed
 * is a course bug (the run stops), and what yours missed goes into *r (checked, bad, the message
 * when it has none). what: the output probed ("out", "residual_out"); sum: what it should hold. */
static void ar_probes_verdict(mgpu_ctx *ctx, const char *name, const char *case_name, ar_probe probes[2],
                              const char *what, const char *sum, mgpu_result *r) {
  char tag[160];
  snprintf(tag, sizeof tag, "%s/probes", name);
  mgpu_hand_over(ctx, tag, probes, 2 * sizeof(ar_probe));
  if (!mgpu_verifies(ctx)) return;
  if (probes[1].bad) {
    char msg[400];
    snprintf(msg, sizeof msg,
             "a probe of the timed calls found the baseline's %s[%lld] = %.9g where the reference says %.9g (op %u, "
             "%u probed calls): the probe is wrong, not your code (a course bug)",
             what, probes[1].at, (double)probes[1].got, (double)probes[1].want, probes[1].call, probes[1].probes);
    mgpu_fail("driver", "probe", __FILE__, __LINE__, 0, msg);
  }
  r->checked += (long long)probes[0].probes * kProbeLanes;
  if (!probes[0].bad) return;
  r->bad += probes[0].bad;
  if (r->msg[0]) return;
  char shown[48];
  ar_fmt_float(shown, sizeof shown, ar_bits(probes[0].got));
  snprintf(r->msg, sizeof r->msg,
           "timing %s: a timed call left %s[%lld] = %s where %s was %.9g (op %u; %u wrong of the places probed in %u "
           "timed calls). Before some timed calls the driver changes one member's input at a few places, and only "
           "that member knows: every call must read every member's current input and write all of %s, even when it "
           "already holds a result",
           case_name, what, probes[0].at, shown, sum, (double)probes[0].want, probes[0].call, probes[0].bad,
           probes[0].probes, what);
}

typedef struct ar_perf {
  ar_state *s;
  ar_view v;
  float *out;
  const float *in;
  long long n;
  unsigned int epoch;
  ncclComm_t comm;
  ar_probes pr;
} ar_perf;

static void op_yours(void *arg, int iter, cudaStream_t stream) {
  ar_perf *p = (ar_perf *)arg;
  (void)iter;
  const uint64_t k = ar_probe_before(&p->pr, stream);
  learner_call(&p->v, p->out, p->n, ++p->epoch, stream);
  ar_expect_no_pending_error();
  ar_probe_after(&p->pr, 0, p->out, k, stream);
}

static void op_nccl(void *arg, int iter, cudaStream_t stream) {
  ar_perf *p = (ar_perf *)arg;
  (void)iter;
  const uint64_t k = ar_probe_before(&p->pr, stream);
  MGPU_NCCL_OWN(ncclAllReduce(p->in, p->out, (size_t)p->n, ncclFloat, ncclSum, p->comm, stream));
  ar_probe_after(&p->pr, 1, p->out, k, stream);
}

/* NCCL refuses two ranks on one GPU: timing needs a GPU per rank. */
static void ar_require_distinct_gpus(mgpu_ctx *ctx) {
  cudaDeviceProp prop;
  MGPU_CUDA(cudaGetDeviceProperties(&prop, ctx->device));
  for (int r = 0; r < ctx->world; r++) {
    char theirs[16];
    memcpy(theirs, prop.uuid.bytes, 16);
    mgpu_share(ctx, "m6-uuid", theirs, sizeof theirs, r);
    if (r != ctx->rank && memcmp(theirs, prop.uuid.bytes, 16) == 0) {
      char msg[200];
      snprintf(msg, sizeof msg,
               "ranks %d and %d share one GPU: the baseline (NCCL) needs a GPU per rank; run the check with --no-perf", r,
               ctx->rank);
      mgpu_fail("driver", "timing", __FILE__, __LINE__, 0, msg);
    }
  }
}

/* One perf case (rank: timed, then kAfterTimingEpochs more epochs checked). Hand-overs:
 * "after-timing/<case>/epoch" (the last epoch the timed calls used), the epochs'
 * "after-timing/<case>/<j>", then "after-timing/<case>/guards". The verifier adds them to *after. */
static void ar_run_perf(ar_state *s, const mgpu_case *c, ncclComm_t comm, ar_tally *after) {
  mgpu_ctx *ctx = s->ctx;
  const long long n = c->n;
  const ar_team t = ar_make_team(ctx, "all");
  const int sess = ++s->sessions;
  char name[96], tag[128];
  snprintf(name, sizeof name, "after-timing/%s", c->name);
  ar_perf p;
  memset(&p, 0, sizeof p);
  ar_probe probes[2];
  memset(probes, 0, sizeof probes);
  mgpu_buf out;
  memset(&out, 0, sizeof out);
  if (mgpu_computes(ctx)) {
    ar_begin_session(s, &t, n);
    out = mgpu_alloc(sizeof(float) * (size_t)n, ctx->device);
    mgpu_fill_fine_f32(ar_in(s, ctx->rank), n, ctx->seed, ctx->rank, sess * 1000, s->stream);
    MGPU_CUDA(cudaStreamSynchronize(s->stream));
    mgpu_barrier(ctx, "m6-perf-filled");

    p.s = s;
    p.v = ar_view_for(s, &t);
    p.out = (float *)out.ptr;
    p.in = ar_in(s, ctx->rank);
    p.n = n;
    p.comm = comm;
    /* The probes' reference: NCCL's sum of the inputs the timed calls start from. */
    snprintf(tag, sizeof tag, "m6-probe-key/%s", c->name);
    ar_probes_begin(ctx, &p.pr, ar_in(s, ctx->rank), NULL, n, tag);
    MGPU_NCCL_OWN(ncclAllReduce(p.in, p.pr.ref, (size_t)n, ncclFloat, ncclSum, comm, s->stream));
    MGPU_CUDA(cudaStreamSynchronize(s->stream));
    mgpu_timing tm;
    memset(&tm, 0, sizeof tm);
    tm.case_name = c->name;
    tm.bytes = (double)n * sizeof(float);
    tm.factor = 1.0;
    tm.metric = "time";
    mgpu_time_pair(ctx, &tm, op_yours, &p, op_nccl, &p, s->stream);
    ar_wait(s, &t, n);
    MGPU_CUDA(cudaDeviceSynchronize());
    ar_probes_end(&p.pr, probes);
    mgpu_barrier(ctx, "m6-perf-timed");

    /* New data over the timed buffers, the epoch count going on from the timed calls. */
    k_fill_f32<<<ar_grid(n), 256, 0, s->stream>>>(ar_in(s, ctx->rank), n, ar_marker(p.epoch));
    MGPU_KERNEL();
    MGPU_CUDA(cudaStreamSynchronize(s->stream));
    mgpu_barrier(ctx, "m6-perf-after");
  }
  snprintf(tag, sizeof tag, "%s/epoch", name);
  mgpu_hand_over(ctx, tag, &p.epoch, sizeof p.epoch);
  ar_tally a;
  ar_tally_init(&a, n);
  ar_run_epochs(s, &t, &p.v, &out, n, p.epoch + 1, kAfterTimingEpochs, sess * 1000 + 500, 0, &a, name);
  long long hits = 0;
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(&out);
  snprintf(tag, sizeof tag, "%s/guards", name);
  mgpu_hand_over(ctx, tag, &hits, sizeof hits);
  if (mgpu_verifies(ctx)) {
    a.r.guard_hits = hits;
    after->r.checked += a.r.checked;
    after->r.bad += a.r.bad;
    after->r.unwritten += a.r.unwritten;
    after->r.guard_hits += a.r.guard_hits;
    if (!after->r.msg[0] && (a.r.bad || a.r.unwritten || a.r.guard_hits)) {
      ar_explain(ctx, &t, n, &a);
      after->r.nfirst = a.r.nfirst;
      memcpy(after->r.first, a.r.first, sizeof a.r.first);
      snprintf(after->r.msg, sizeof after->r.msg, "after timing %s (epochs %u..): %.400s", c->name, p.epoch + 1, a.r.msg);
    }
  }
  ar_probes_verdict(ctx, name, c->name, probes, "out", "the sum of the inputs", &after->r);
  if (mgpu_computes(ctx)) mgpu_free(&out);
}

/* ---- main ---------------------------------------------------------------------------------------- */

static void ar_check_exact_copy(const mgpu_ctx *ctx, cudaStream_t stream) {
  const int n = 4096;
  float *d = NULL, *h = (float *)malloc(sizeof(float) * 2 * n);
  if (!h) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  MGPU_CUDA(cudaMalloc((void **)&d, sizeof(float) * 2 * n));
  for (int it = 0; it < 2; it++) {
    const uint64_t key = mgpu_exact_key(ctx->seed, ctx->rank, 77 + it);
    k_exact_probe<<<4, 256, 0, stream>>>(key, d, n);
    MGPU_KERNEL();
    MGPU_CUDA(cudaMemcpyAsync(h, d, sizeof(float) * 2 * n, cudaMemcpyDeviceToHost, stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    for (int i = 0; i < n; i++)
      if (h[i] != mgpu_exact_value_k(key, i) || h[n + i] != mgpu_fine_value_k(key, i))
        mgpu_fail("driver", "ar_exact", __FILE__, __LINE__, 0,
                  "the driver's copy of the harness's exact-value functions differs from mgpu_exact_value_k or "
                  "mgpu_fine_value_k: update ar_exact and ar_value in allreduce_bench.cuh");
  }
  MGPU_CUDA(cudaFree(d));
  free(h);
}

/* The verifier's twin of ar_check_exact_copy: it compares on the CPU with ar_exact and ar_value too. */
static void ar_check_exact_host(const mgpu_ctx *ctx) {
  for (int it = 0; it < 2; it++) {
    const uint64_t key = mgpu_exact_key(ctx->seed, ctx->rank, 77 + it);
    for (int i = 0; i < 4096; i++)
      if (ar_exact(key, i) != mgpu_exact_value_k(key, i) || ar_value(key, i) != mgpu_fine_value_k(key, i))
        mgpu_fail("driver", "ar_exact", __FILE__, __LINE__, 0,
                  "the driver's copy of the harness's exact-value functions differs from mgpu_exact_value_k or "
                  "mgpu_fine_value_k on the host: update ar_exact and ar_value in allreduce_bench.cuh");
  }
}

static size_t ar_align(size_t x) { return (x + 4095) / 4096 * 4096; }

/* What every module-6 all-reduce driver does first, after mgpu_init: refuses more ranks than the
 * symmetric buffers hold (the verifier too: teams have at most AR_MAX_RANKS members); then, in the
 * rank, makes the streams, checks the exact-data copy, allocates the symmetric block (input,
 * scratch and flags for max_n floats; `name` labels it) and the decoy, and sizes the hog. The
 * verifier, which has no GPU, checks its host copy of the exact values only. */
static void ar_setup(ar_state *s, mgpu_ctx *ctx, long long max_n, const char *name) {
  if (ctx->world > AR_MAX_RANKS) {
    char msg[120];
    snprintf(msg, sizeof msg, "%s runs with at most %d ranks (symmetric buffers), this job has %d", AR_FN, AR_MAX_RANKS,
             ctx->world);
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0, msg);
  }
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->max_n = max_n < 1 ? 1 : max_n;
  if (!mgpu_computes(ctx)) {
    ar_check_exact_host(ctx);
    return;
  }
  MGPU_CUDA(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  MGPU_CUDA(cudaStreamCreateWithFlags(&s->hog_stream, cudaStreamNonBlocking));
  MGPU_CUDA(cudaEventCreateWithFlags(&s->hog_ev, cudaEventDisableTiming));
  ar_check_exact_copy(ctx, s->stream);

  s->scratch_floats = 2LL * ctx->world * s->max_n;
  s->in_off = 0;
  s->scratch_off = ar_align(sizeof(float) * (size_t)s->max_n);
  s->flags_off = s->scratch_off + ar_align(sizeof(float) * (size_t)s->scratch_floats);
  mgpu_symm_alloc(ctx, name, s->flags_off + sizeof(unsigned int) * AR_FLAG_WORDS, &s->symm);
  MGPU_CUDA(cudaMalloc((void **)&s->decoy, s->flags_off + sizeof(unsigned int) * AR_FLAG_WORDS));

  /* The hog: two blocks per SM on all SMs but kHogFreeSMs. */
  int sms = 0;
  MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device));
  s->hog_blocks = sms > kHogFreeSMs ? 2 * (sms - kHogFreeSMs) : 0;
  MGPU_CUDA(cudaFuncSetAttribute(k_hog, cudaFuncAttributeMaxDynamicSharedMemorySize, kHogSmem));
  MGPU_CUDA(cudaMalloc((void **)&s->hog_started, sizeof(unsigned int)));
  MGPU_CUDA(cudaMemset(s->hog_started, 0, sizeof(unsigned int)));
}

/* The team layouts every case runs on: the whole job, each rank alone, and the whole job reversed
 * (2 ranks) or split into even and odd ranks (3 or more). Returns how many. */
static int ar_layouts(const mgpu_ctx *ctx, const char *layouts[3]) {
  int n = 0;
  layouts[n++] = "all";
  if (ctx->world > 1) layouts[n++] = "solo";
  if (ctx->world == 2) layouts[n++] = "reversed";
  if (ctx->world >= 3) layouts[n++] = "split";
  return n;
}

/* A communicator of all ranks for the NCCL baseline (distinct GPUs required). */
static ncclComm_t ar_baseline_comm(mgpu_ctx *ctx) {
  ar_require_distinct_gpus(ctx);
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  mgpu_nccl_unique_id(ctx, &id);
  MGPU_NCCL(ncclCommInitRank(&comm, ctx->world, id, ctx->rank));
  return comm;
}

/* ar_run_epochs' buffers: in the rank, snap_floats floats of snapshots on the GPU and a pinned
 * host buffer of max_n floats; in the verifier, the host buffer only. */
static void ar_alloc_outputs(ar_state *s, long long snap_floats) {
  const size_t bytes = sizeof(float) * (size_t)s->max_n;
  s->snap_floats = snap_floats;
  if (mgpu_computes(s->ctx)) {
    MGPU_CUDA(cudaMalloc((void **)&s->d_snap, sizeof(float) * (size_t)snap_floats));
    MGPU_CUDA(cudaMallocHost((void **)&s->h_out, bytes));
  } else {
    s->h_out = (float *)malloc(bytes);
    if (!s->h_out) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  }
}

static void ar_free_outputs(ar_state *s) {
  if (mgpu_computes(s->ctx)) {
    MGPU_CUDA(cudaFree(s->d_snap));
    MGPU_CUDA(cudaFreeHost(s->h_out));
  } else {
    free(s->h_out);
  }
  s->d_snap = s->h_out = NULL;
}

/* Undoes ar_setup once the GPU is idle (nothing to undo in the verifier). */
static void ar_teardown(ar_state *s) {
  if (!mgpu_computes(s->ctx)) return;
  MGPU_CUDA(cudaDeviceSynchronize());
  mgpu_symm_free(s->ctx, &s->symm);
  MGPU_CUDA(cudaFree(s->decoy));
  MGPU_CUDA(cudaFree(s->hog_started));
  MGPU_CUDA(cudaEventDestroy(s->hog_ev));
  MGPU_CUDA(cudaStreamDestroy(s->hog_stream));
  MGPU_CUDA(cudaStreamDestroy(s->stream));
}

static int ar_main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  /* The sizes of this run decide the buffers: the largest n, and the most floats of snapshots
   * one session takes (its epochs times n). */
  long long max_n = 1, snap = 1;
  for (int k = 0; k < ctx.ncases; k++) {
    const long long n = ctx.cases[k].n, e = epochs_for(n) < kMaxEpochs ? epochs_for(n) : kMaxEpochs;
    if (n > max_n) max_n = n;
    if (e * n > snap) snap = e * n;
  }
  if (ctx.perf)
    for (int k = 0; k < ctx.nperf_cases; k++) {
      const long long n = ctx.perf_cases[k].n;
      if (n > max_n) max_n = n;
      if (kAfterTimingEpochs * n > snap) snap = kAfterTimingEpochs * n;
    }
  ar_state s;
  ar_setup(&s, &ctx, max_n, "module6-ar");
  ar_alloc_outputs(&s, snap);

  const char *layouts[3];
  const int nlayouts = ar_layouts(&ctx, layouts);
  for (int k = 0; k < ctx.ncases; k++)
    for (int l = 0; l < nlayouts; l++) ar_run_case(&s, &ctx.cases[k], layouts[l]);

  if (ctx.perf && ctx.nperf_cases > 0) {
    ncclComm_t comm = NULL;
    if (mgpu_computes(&ctx)) comm = ar_baseline_comm(&ctx);
    ar_tally after;
    ar_tally_init(&after, 0);
    for (int k = 0; k < ctx.nperf_cases; k++) ar_run_perf(&s, &ctx.perf_cases[k], comm, &after);
    if (mgpu_verifies(&ctx)) mgpu_record_case("after-timing", &after.r, 0);
    if (mgpu_computes(&ctx)) {
      MGPU_CUDA(cudaDeviceSynchronize());
      MGPU_NCCL(ncclCommDestroy(comm));
    }
  }

  ar_teardown(&s);
  ar_free_outputs(&s);
  return mgpu_finish(&ctx);
}

#endif /* MODULE6_ALLREDUCE_BENCH_CUH */
