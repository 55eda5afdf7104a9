/*
 * driver.cu — module4/small-allreduce (course-owned).
 *
 * One process per GPU, each one NVSHMEM PE (mgpu_nvshmem_init), plus an NCCL communicator over
 * the same processes for the baseline.
 *
 * Setup: allreduce_setup (yours) once; every PE checks that slots and signals lie in NVSHMEM's
 * symmetric heap (nvshmem_ptr) and the PEs agree before the first call.
 *
 * Correctness, per case (n = floats per PE): kCalls calls queued back to back on the stream,
 * each with its own input (fine exact values of (seed, PE, case, call)) and its own output
 * (poisoned, guarded); the driver synchronizes only after the last one. Around the calls it
 * pushes the PEs apart on purpose, a different PE each call:
 *   - one PE starts the call 1 ms late (a sleeping kernel first on its stream): the others'
 *     blocks and signals for this call land before its kernel starts, and they wait for it;
 *   - another PE runs a busy kernel on a second stream alongside the call (300 us on every SM),
 *     which slows its kernel down: its neighbours finish first and go on to their next call
 *     while it is still adding this one's blocks.
 * A signal of an earlier call taken for this call's, a slot overwritten by a faster PE's next
 * call, a signal that overtakes its data: each leaves a wrong sum in some call on some PE. Every
 * element of every output on every PE is compared exactly with the host sum (tolerance 0);
 * mismatches are explained when they match a pattern (an earlier call's sum, a PE's block
 * missing or from another call). Inputs must come back unchanged. A call that has not finished
 * after 20 s is reported as a hang.
 *
 * Performance (headline 64KiB): allreduce_small against ncclAllReduce on the same input (NCCL
 * writes an output of its own), in the same run (ABAB), metric "time" (ratio = NCCL time /
 * yours). The other perf sizes show where the one-shot algorithm stops paying.
 * After timing ("after-timing", per perf size, not in MGPU_CASES): the input did not change
 * during timing, so out must hold the sum of the timed inputs; then new exact inputs go into the
 * same in, out is poisoned, allreduce_small runs once more exactly as the timed calls ran it,
 * and every element is compared with the host sum. in must come back unchanged.
 *
 * Every comparison is the PE's verifier's (`verifier: true`, docs/protocol.md §4): the PE hands
 * over what it found of allreduce_setup, every call's out and in, and its guard counts, and
 * never knows another PE's inputs or the sums.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#include "small-allreduce.h"

enum { kCalls = 6, kWatchdogS = 20 };
static const long long kLateNs = 1000LL * 1000;   /* 1 ms */
static const long long kBusyNs = 300LL * 1000;    /* 300 us */
static const long long kMaxN = 16LL << 20;        /* floats: 64 MiB per PE */

__device__ float busy_sink;

/* Keeps every SM's issue slots busy for `ns` nanoseconds (launched on a second stream). */
__global__ void busy(long long ns) {
  unsigned long long t0, t;
  float x = (float)threadIdx.x;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    for (int i = 0; i < 64; i++) x = x * 1.000001f + 0.5f;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < (unsigned long long)ns);
  if (x == -1.0f) busy_sink = x; /* never true; keeps the loop */
}

/* The input iteration of (case, call) for the exact values; the perf inputs apart. */
static int data_iter(int case_index, int call) { return case_index * 64 + call; }
static const int kPerfIter = 1 << 20;
static const int kAfterTimingIter = (1 << 20) + 1;

static void finish_or_fail(cudaStream_t stream, const mgpu_ctx *ctx, const char *what) {
  mgpu_wait_or_hang(ctx, stream, kWatchdogS, what,
                    "a wait for a signal that never comes. Does every PE put to every other PE? "
                    "Is the value waited for one that this call's puts actually write? Was a "
                    "signal reset after a faster PE had already set it for this call?");
}

/* ---- setup check ------------------------------------------------------------------------- */

enum { kSetupOK = 0, kSlotsNull, kSlotsNotSymmetric, kSlotsSmall, kSignalsNull,
       kSignalsNotSymmetric };

static int judge_setup(const allreduce *ar, size_t max_n, int me, int npes) {
  if (!ar->slots) return kSlotsNull;
  if (!nvshmem_ptr(ar->slots, me)) return kSlotsNotSymmetric;
  const size_t need = (size_t)(npes - 1) * max_n * sizeof(float);
  if (ar->slots_bytes < need || ar->slots_bytes == 0 ||
      !nvshmem_ptr((const char *)ar->slots + ar->slots_bytes - 1, me))
    return kSlotsSmall;
  if (!ar->signals || ar->signals_count == 0) return kSignalsNull;
  if (!nvshmem_ptr(ar->signals, me) || !nvshmem_ptr(ar->signals + ar->signals_count - 1, me))
    return kSignalsNotSymmetric;
  return kSetupOK;
}

static int agree_setup(mgpu_ctx *ctx, int mine, int *what) {
  int bad = -1;
  for (int r = 0; r < ctx->world; r++) {
    char key[64];
    int v = r == ctx->rank ? mine : 0;
    snprintf(key, sizeof key, "allreduce-setup-%d", r);
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
                         size_t max_n, int npes) {
  if (!mgpu_verifies(ctx)) return;
  mgpu_result r;
  mgpu_result_init(&r, c->n);
  r.checked = r.unwritten = c->n;
  const char *why;
  switch (what) {
  case kSlotsNull: why = "left slots NULL"; break;
  case kSlotsNotSymmetric: why = "set slots to memory outside NVSHMEM's symmetric heap"; break;
  case kSlotsSmall: why = "gave slots too small for the blocks of the other PEs"; break;
  case kSignalsNull: why = "left signals NULL (or signals_count 0)"; break;
  default: why = "set signals to memory outside NVSHMEM's symmetric heap"; break;
  }
  snprintf(r.msg, sizeof r.msg,
           "allreduce_setup on PE %d %s (max_n %zu floats, %d PEs: slots need at least "
           "(npes - 1) * max_n floats); no sum was computed. Puts and signals can only target "
           "memory the other PEs can address: allocate slots and signals in the symmetric heap "
           "(nvshmem_malloc / nvshmem_calloc), on every PE, same sizes, same order",
           bad_pe, why, max_n, npes);
  mgpu_record_case(c->name, &r, 1);
}

/* ---- correctness ------------------------------------------------------------------------- */

/* Hypotheses for a wrong element, counted over all wrong elements of a case on this PE. */
typedef struct diagnosis {
  long long wrong;                       /* finite, wrong */
  long long stale[kCalls];               /* the whole sum of call j */
  long long *missing;                    /* [npes]: PE p's block left out */
  long long *other_call;                 /* [npes * kCalls]: PE p's block from call j */
  int first_call;                        /* first call with a mismatch, -1 when none */
} diagnosis;

static void run_case(mgpu_ctx *ctx, allreduce *ar, int case_index, cudaStream_t stream,
                     cudaStream_t busy_stream, int sms) {
  const mgpu_case *c = &ctx->cases[case_index];
  const int me = ctx->rank, npes = ctx->world;
  if (c->n < 1 || c->n > kMaxN) {
    if (mgpu_verifies(ctx)) {
      mgpu_result r;
      mgpu_result_init(&r, 0);
      snprintf(r.msg, sizeof r.msg, "case %s: n must be a float count in 1..%lld", c->name,
               kMaxN);
      mgpu_record_case(c->name, &r, 1);
    }
    return;
  }
  const long long n = c->n;
  const size_t bytes = (size_t)n * sizeof(float);
  char tag[128];
  mgpu_buf in[kCalls], out[kCalls];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  if (mgpu_computes(ctx)) {
    for (int k = 0; k < kCalls; k++) {
      in[k] = mgpu_alloc(bytes, ctx->device);
      out[k] = mgpu_alloc(bytes, ctx->device);
      mgpu_fill_fine_f32((float *)in[k].ptr, n, ctx->seed, me, data_iter(case_index, k), stream);
    }
    MGPU_CUDA(cudaStreamSynchronize(stream));
    mgpu_barrier(ctx, "case-start"); /* the pushes apart below are relative to a common start */

    for (int k = 0; k < kCalls; k++) {
      const int late = (k + case_index) % npes, slow = (k + case_index + 1) % npes;
      if (me == late) mgpu_delay(stream, kLateNs);
      if (me == slow) {
        busy<<<sms, 1024, 0, busy_stream>>>(kBusyNs);
        MGPU_KERNEL();
      }
      MGPU_LEARNER(allreduce_small(ar, (const float *)in[k].ptr, (float *)out[k].ptr, (size_t)n,
                                   stream));
    }
    finish_or_fail(stream, ctx, "allreduce_small");
    MGPU_CUDA(cudaStreamSynchronize(busy_stream));
  }

  /* Expected values, where the check is made: v[p][k][i] for every PE p and call k are
   * recomputed on the fly from keys. */
  uint64_t *keys = NULL;
  float *want = NULL, *host = (float *)mgpu_host_alloc(ctx, bytes);
  diagnosis d;
  memset(&d, 0, sizeof d);
  d.first_call = -1;
  if (mgpu_verifies(ctx)) {
    keys = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)npes * kCalls);
    want = (float *)malloc(bytes * kCalls);
    d.missing = (long long *)calloc((size_t)npes, sizeof(long long));
    d.other_call = (long long *)calloc((size_t)npes * kCalls, sizeof(long long));
    if (!keys || !want || !d.missing || !d.other_call)
      mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
    for (int p = 0; p < npes; p++)
      for (int k = 0; k < kCalls; k++)
        keys[p * kCalls + k] = mgpu_exact_key(ctx->seed, p, data_iter(case_index, k));
    for (int k = 0; k < kCalls; k++)
      for (long long i = 0; i < n; i++) {
        float s = 0.0f;
        for (int p = 0; p < npes; p++) s += mgpu_fine_value_k(keys[p * kCalls + k], i);
        want[(size_t)k * n + i] = s;
      }
  }

  /* Per call: out, then in, read back by the rank and handed over. */
  mgpu_result r;
  mgpu_result_init(&r, n * kCalls);
  long long in_changed = 0, guard_hits = 0;
  for (int k = 0; k < kCalls; k++) {
    if (mgpu_computes(ctx))
      MGPU_CUDA(cudaMemcpy(host, out[k].ptr, bytes, cudaMemcpyDeviceToHost));
    snprintf(tag, sizeof tag, "%s/%d/out", c->name, k);
    if (mgpu_hand_over(ctx, tag, host, bytes)) {
      const float *w = want + (size_t)k * n;
      for (long long i = 0; i < n; i++) {
        const long long bad0 = r.bad + r.unwritten;
        mgpu_result_add(&r, (long long)k * n + i, host[i], w[i], 0.0);
        if (r.bad + r.unwritten == bad0) continue;
        if (d.first_call < 0) d.first_call = k;
        if (isnan(host[i])) continue;
        d.wrong++;
        for (int j = 0; j < kCalls; j++)
          if (j != k && host[i] == want[(size_t)j * n + i]) d.stale[j]++;
        for (int p = 0; p < npes; p++) {
          if (p == me) continue;
          const float without_p = w[i] - mgpu_fine_value_k(keys[p * kCalls + k], i);
          if (host[i] == without_p) d.missing[p]++;
          for (int j = 0; j < kCalls; j++)
            if (j != k && host[i] == without_p + mgpu_fine_value_k(keys[p * kCalls + j], i))
              d.other_call[p * kCalls + j]++;
        }
      }
    }
    if (mgpu_computes(ctx))
      MGPU_CUDA(cudaMemcpy(host, in[k].ptr, bytes, cudaMemcpyDeviceToHost));
    snprintf(tag, sizeof tag, "%s/%d/in", c->name, k);
    if (mgpu_hand_over(ctx, tag, host, bytes))
      for (long long i = 0; i < n; i++)
        in_changed += host[i] != mgpu_fine_value_k(keys[me * kCalls + k], i);
  }
  if (mgpu_computes(ctx))
    for (int k = 0; k < kCalls; k++)
      guard_hits += mgpu_guard_hits(&in[k]) + mgpu_guard_hits(&out[k]);
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  mgpu_hand_over(ctx, tag, &guard_hits, sizeof guard_hits);
  r.guard_hits = guard_hits;

  if (mgpu_verifies(ctx)) {
    /* The hypothesis that explains most wrong elements, if it explains at least half. */
    long long best = 0;
    int kind = 0, best_p = -1, best_j = -1;
    for (int j = 0; j < kCalls; j++)
      if (d.stale[j] > best) best = d.stale[j], kind = 1, best_j = j;
    for (int p = 0; p < npes; p++) {
      if (d.missing[p] > best) best = d.missing[p], kind = 2, best_p = p;
      for (int j = 0; j < kCalls; j++)
        if (d.other_call[p * kCalls + j] > best)
          best = d.other_call[p * kCalls + j], kind = 3, best_p = p, best_j = j;
    }
    if (best * 2 < d.wrong || d.wrong == 0) kind = 0;

    char head[200];
    snprintf(head, sizeof head, "PE %d of %d, n = %lld floats, %d calls back to back", me, npes,
             n, kCalls);
    if (in_changed) {
      snprintf(r.msg, sizeof r.msg,
               "%s: in was modified (%lld elements no longer hold this PE's input): in is the "
               "source of your puts, read it only",
               head, in_changed);
    } else if (r.bad || r.unwritten) {
      char why[300] = "";
      if (kind == 1)
        snprintf(why, sizeof why,
                 " Most wrong elements hold the whole sum of call %d: a signal of another call "
                 "was taken for this call's.",
                 best_j + 1);
      else if (kind == 2)
        snprintf(why, sizeof why,
                 " In most wrong elements PE %d's block is missing from the sum: its data had "
                 "not landed when it was added (a signal ahead of its data, or no wait).",
                 best_p);
      else if (kind == 3)
        snprintf(why, sizeof why,
                 " In most wrong elements PE %d's block is the one of call %d, an earlier or "
                 "later call: a leftover signal was taken for this call's, or PE %d's next call "
                 "overwrote the slot while it was being added.",
                 best_p, best_j + 1, best_p);
      snprintf(r.msg, sizeof r.msg,
               "%s: out must hold the sum of every PE's in; first wrong in call %d, %lld elements "
               "wrong and %lld still the poison over all calls.%s",
               head, d.first_call + 1, r.bad, r.unwritten, why);
    } else if (r.guard_hits) {
      snprintf(r.msg, sizeof r.msg,
               "%s: a write landed outside in or out (%lld guard bytes changed)", head,
               r.guard_hits);
    }
    mgpu_record_case(c->name, &r, in_changed != 0);
  }

  mgpu_host_free(ctx, host);
  free(d.other_call);
  free(d.missing);
  free(want);
  free(keys);
  if (mgpu_computes(ctx))
    for (int k = 0; k < kCalls; k++) {
      mgpu_free(&out[k]);
      mgpu_free(&in[k]);
    }
}

/* ---- performance ------------------------------------------------------------------------- */

typedef struct timed {
  allreduce *ar;
  mgpu_buf in, out;
  mgpu_buf nccl_out; /* the baseline's: out keeps what your last timed call wrote */
  size_t n;
  ncclComm_t comm;
} timed;

static void call_small(timed *t, cudaStream_t stream) {
  MGPU_LEARNER(allreduce_small(t->ar, (const float *)t->in.ptr, (float *)t->out.ptr, t->n,
                               stream));
}

static void op_yours(void *arg, int iter, cudaStream_t stream) {
  (void)iter;
  call_small((timed *)arg, stream);
}

static void op_nccl(void *arg, int iter, cudaStream_t stream) {
  timed *t = (timed *)arg;
  (void)iter;
  MGPU_NCCL_OWN(ncclAllReduce(t->in.ptr, t->nccl_out.ptr, t->n, ncclFloat, ncclSum, t->comm, stream));
}

/* Compares n floats of host (what the rank read back) with want[], adding to r from index
 * `offset`; returns the wrong ones. */
static long long compare_out(mgpu_result *r, long long offset, const float *want,
                             const float *host, long long n) {
  const long long before = r->bad + r->unwritten;
  for (long long i = 0; i < n; i++) mgpu_result_add(r, offset + i, host[i], want[i], 0.0);
  return r->bad + r->unwritten - before;
}

/* want[i] = the sum over all PEs of their exact input of iteration `iter`. Only where the
 * check is made: a PE checked by a verifier cannot make the other PEs' inputs. */
static void exact_sum(const mgpu_ctx *ctx, int iter, long long n, float *want) {
  for (long long i = 0; i < n; i++) want[i] = 0.0f;
  for (int p = 0; p < ctx->world; p++) {
    const uint64_t key = mgpu_exact_key(ctx->seed, p, iter);
    for (long long i = 0; i < n; i++) want[i] += mgpu_fine_value_k(key, i);
  }
}

/* The case "after-timing": the last timed call's out (its input had not changed), then one
 * more call with a new input in the same buffers. Collective: every PE makes the call. The PE
 * hands over both outs, in and its guard count; its verifier compares. */
static void check_after_timing(mgpu_ctx *ctx, timed *t, const char *perf_case,
                               cudaStream_t stream) {
  const long long n = (long long)t->n;
  const size_t bytes = (size_t)n * sizeof(float);
  float *want = NULL, *host = (float *)mgpu_host_alloc(ctx, bytes);
  if (mgpu_verifies(ctx) && !(want = (float *)malloc(bytes)))
    mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  mgpu_result r;
  mgpu_result_init(&r, 2 * n);
  long long last_wrong = 0, fresh_wrong = 0, in_changed = 0, hits = 0;
  char tag[128];

  if (mgpu_computes(ctx))
    MGPU_CUDA(cudaMemcpy(host, t->out.ptr, bytes, cudaMemcpyDeviceToHost));
  snprintf(tag, sizeof tag, "after-timing/%s/last", perf_case);
  if (mgpu_hand_over(ctx, tag, host, bytes)) {
    exact_sum(ctx, kPerfIter, n, want);
    last_wrong = compare_out(&r, 0, want, host, n);
  }
  if (mgpu_computes(ctx)) {
    mgpu_fill_fine_f32((float *)t->in.ptr, n, ctx->seed, ctx->rank, kAfterTimingIter, stream);
    mgpu_poison(&t->out, stream);
    call_small(t, stream);
    finish_or_fail(stream, ctx, "allreduce_small (after timing)");
    MGPU_CUDA(cudaMemcpy(host, t->out.ptr, bytes, cudaMemcpyDeviceToHost));
  }
  snprintf(tag, sizeof tag, "after-timing/%s/new", perf_case);
  if (mgpu_hand_over(ctx, tag, host, bytes)) {
    exact_sum(ctx, kAfterTimingIter, n, want);
    fresh_wrong = compare_out(&r, n, want, host, n);
  }
  if (mgpu_computes(ctx))
    MGPU_CUDA(cudaMemcpy(host, t->in.ptr, bytes, cudaMemcpyDeviceToHost));
  snprintf(tag, sizeof tag, "after-timing/%s/in", perf_case);
  if (mgpu_hand_over(ctx, tag, host, bytes)) {
    const uint64_t mine = mgpu_exact_key(ctx->seed, ctx->rank, kAfterTimingIter);
    for (long long i = 0; i < n; i++) in_changed += host[i] != mgpu_fine_value_k(mine, i);
  }
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(&t->in) + mgpu_guard_hits(&t->out);
  snprintf(tag, sizeof tag, "after-timing/%s/guards", perf_case);
  mgpu_hand_over(ctx, tag, &hits, sizeof hits);
  r.guard_hits = hits;

  if (mgpu_verifies(ctx)) {
    if (in_changed)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, in was modified (perf case %s: %lld elements no longer "
               "hold this PE's input): in is the source of your puts, read it only",
               perf_case, in_changed);
    else if (last_wrong)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, out did not hold the sum of the inputs they were given: "
               "every call must do the whole work, repeated calls with the same buffers included "
               "(perf case %s: %lld wrong elements on PE %d)",
               perf_case, last_wrong, ctx->rank);
    else if (fresh_wrong)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, a call with new data in the same buffers gave a wrong "
               "result: every call must do the whole work, repeated calls with the same buffers "
               "included (perf case %s: %lld of %lld floats wrong on PE %d of %d)",
               perf_case, fresh_wrong, n, ctx->rank, ctx->world);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg,
               "after the timed calls, a write landed outside in or out (perf case %s: %lld "
               "guard bytes changed)",
               perf_case, r.guard_hits);
    mgpu_record_case("after-timing", &r, in_changed != 0);
  }
  mgpu_host_free(ctx, host);
  free(want);
}

static void run_perf(mgpu_ctx *ctx, allreduce *ar, const mgpu_case *c, ncclComm_t comm,
                     cudaStream_t stream) {
  if (c->n < 1 || c->n > kMaxN) {
    if (mgpu_computes(ctx))
      mgpu_note("perf case %s: n must be a float count in 1..%lld; skipped", c->name, kMaxN);
    return;
  }
  timed t;
  memset(&t, 0, sizeof t);
  t.ar = ar;
  t.n = (size_t)c->n;
  t.comm = comm;
  if (mgpu_computes(ctx)) {
    t.in = mgpu_alloc(t.n * sizeof(float), ctx->device);
    t.out = mgpu_alloc(t.n * sizeof(float), ctx->device);
    t.nccl_out = mgpu_alloc(t.n * sizeof(float), ctx->device);
    mgpu_fill_fine_f32((float *)t.in.ptr, c->n, ctx->seed, ctx->rank, kPerfIter, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));

    mgpu_timing tm;
    memset(&tm, 0, sizeof tm);
    tm.case_name = c->name;
    tm.bytes = (double)t.n * sizeof(float);
    tm.factor = 2.0 * (ctx->world - 1) / ctx->world;
    tm.metric = "time";
    mgpu_time_pair(ctx, &tm, op_yours, &t, op_nccl, &t, stream);
    finish_or_fail(stream, ctx, "allreduce_small (timed)");
  }
  check_after_timing(ctx, &t, c->name, stream);
  if (mgpu_computes(ctx)) {
    mgpu_free(&t.nccl_out);
    mgpu_free(&t.out);
    mgpu_free(&t.in);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream = NULL, busy_stream = NULL;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int sms = 0;

  mgpu_init(&ctx, argc, argv);
  if (mgpu_computes(&ctx)) {
    /* Two sets of slots for every PE at the largest size stay far below this; NVSHMEM
     * reserves 1 GiB unless told otherwise. NCCL is the baseline here, so NVSHMEM is asked not
     * to bring up one of its own. Both are read when NVSHMEM starts. */
    setenv("NVSHMEM_SYMMETRIC_SIZE", "256M", 1);
    setenv("NVSHMEM_DISABLE_NCCL", "1", 0);
    mgpu_nvshmem_init(&ctx);
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    MGPU_CUDA(cudaStreamCreateWithFlags(&busy_stream, cudaStreamNonBlocking));
    MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx.device));
    mgpu_nccl_unique_id(&ctx, &id);
    MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));
  }

  size_t max_n = 1;
  for (int k = 0; k < ctx.ncases; k++)
    if (ctx.cases[k].n > 0 && ctx.cases[k].n <= kMaxN && (size_t)ctx.cases[k].n > max_n)
      max_n = (size_t)ctx.cases[k].n;
  if (ctx.perf)
    for (int k = 0; k < ctx.nperf_cases; k++)
      if (ctx.perf_cases[k].n > 0 && ctx.perf_cases[k].n <= kMaxN &&
          (size_t)ctx.perf_cases[k].n > max_n)
        max_n = (size_t)ctx.perf_cases[k].n;

  /* What the PE found of allreduce_setup, as a fact it hands over: {first bad PE, what}. */
  allreduce ar;
  memset(&ar, 0, sizeof ar);
  int setup[2] = {-1, kSetupOK};
  if (mgpu_computes(&ctx)) {
    MGPU_LEARNER(allreduce_setup(&ar, max_n));
    setup[0] = agree_setup(&ctx, judge_setup(&ar, max_n, ctx.rank, ctx.world), &setup[1]);
  }
  mgpu_hand_over(&ctx, "setup", setup, sizeof setup);
  if (setup[0] >= 0) {
    for (int k = 0; k < ctx.ncases; k++)
      setup_failed(&ctx, &ctx.cases[k], setup[0], setup[1], max_n, ctx.world);
  } else {
    for (int k = 0; k < ctx.ncases; k++) run_case(&ctx, &ar, k, stream, busy_stream, sms);
    if (ctx.perf) {
      for (int k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, &ar, &ctx.perf_cases[k], comm, stream);
      if (ctx.rank == 0 && mgpu_computes(&ctx))
        mgpu_note("every perf size is timed: the one-shot all-reduce moves (npes - 1) * n floats "
                  "into every PE in one hop, NCCL's ring 2 (npes - 1) / npes * n in 2 (npes - 1) "
                  "steps; the ratio per size shows where one stops paying for the other");
    }
  }

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamSynchronize(stream));
    mgpu_barrier(&ctx, "teardown"); /* a PE that died fails here, not in NVSHMEM's barrier */
    MGPU_LEARNER(allreduce_teardown(&ar));
    MGPU_NCCL(ncclCommDestroy(comm));
    MGPU_CUDA(cudaStreamDestroy(busy_stream));
    MGPU_CUDA(cudaStreamDestroy(stream));
    nvshmem_finalize();
  }
  return mgpu_finish(&ctx);
}
