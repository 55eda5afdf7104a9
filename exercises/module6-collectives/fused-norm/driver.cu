/*
 * driver.cu: module6/fused-norm (course-owned).
 *
 * The learner's fused_allreduce_rmsnorm (all-reduce + residual add + RMSNorm in one kernel)
 * against ncclAllReduce followed by this driver's residual + RMSNorm kernel on the same stream.
 *
 * What comes from ../shared/allreduce_bench.cuh (the driver of one-shot and two-shot): the
 * symmetric buffers and their layout, the teams ("all", "solo", "reversed", "split") and the
 * views, the sessions (flags zeroed, inputs holding marker(0)), the two ways of shifting the
 * ranks against each other (a 100 us delay before one member's fill; a kernel holding all SMs
 * but one of one member), the hang and fault reports, the exact values and markers, and the
 * classification and explanation of a wrong all-reduce. Its own loops (ar_run_epochs,
 * ar_run_perf, ar_main) are not used here: they check a plain all-reduce through learner_call,
 * which this driver defines only so that the header compiles.
 *
 * Cases: n = rows * 1000000 + hidden (the manifest's comment). Per epoch e of a session, on
 * `stream`, every member:
 *     fill the residual R (rows x hidden) and gamma (hidden) with exact values of this epoch,
 *         the same on every member (made from the run's pattern key, which every rank has)
 *     [delay]  fill own input x with fine exact values of (seed, rank, iteration)
 *     poison residual_out and out                                 [hog + gate]
 *     the learner's call (epoch e, eps(e))
 *     fill own input with marker(e)
 *     copy residual_out and out aside (the epoch's snapshots)
 * The comparisons are the verifier's (`verifier: true`, docs/protocol.md §4): once the session's
 * work is done the rank hands over each epoch's residual_out and out (mgpu_hand_over()), then its
 * guard counts; after timing, also the baseline's outputs and its epoch count. The verifier,
 * which alone knows the other ranks' inputs, compares on the CPU, every element:
 * residual_out bit for bit with sum(x) + R (multiples of 1/64 below 2^10: exact in any order); out with
 * s * (mean(s^2) + eps)^-1/2 * gamma computed in double (the row's sum of squares is exact),
 * within kRtol * |want| + kAtol (the harness compares with an absolute tolerance only, so the
 * relative one lives here).
 * eps(e) is 64, 256, 1024 or 4096, the size of mean(s^2) itself (s is a sum of values in
 * [-64, 64]), so that where eps goes shows. gamma is in [0.25, 1.25], in steps of 1/128.
 *
 * A wrong residual_out is explained like a wrong one-shot all-reduce (which member's input was
 * read too early, too late, left out...), with "out" renamed "residual_out". A wrong out with a
 * right residual_out is matched on the host against the usual mistakes: eps outside the root,
 * no eps, no gamma, the statistic of this member's own part or of the sum without the residual,
 * the sum of squares instead of the mean.
 */
#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "fused_norm.h"

#define AR_FN "fused_allreduce_rmsnorm"

/* allreduce_bench.cuh's plain all-reduce loops call these; this driver never runs them. */
static void learner_call(const ar_view *v, float *out, long long n, unsigned int epoch, cudaStream_t stream) {
  (void)v;
  (void)out;
  (void)n;
  (void)epoch;
  (void)stream;
  mgpu_fail("driver", "learner_call", __FILE__, __LINE__, 0, "module6/fused-norm has no plain all-reduce (a course bug)");
}

/* Epochs per correctness case of n = rows * hidden floats per member. */
static int epochs_for(long long n) { return n <= 65536 ? 24 : 12; }

#include "allreduce_bench.cuh"

static const long long kShape = 1000000; /* n = rows * kShape + hidden */
static const unsigned int kResidualId = 0x5245; /* tells the residual's and gamma's pattern keys apart */
static const unsigned int kGammaId = 0x4741;
static const double kRtol = 5e-4, kAtol = 1e-6; /* out's tolerance: relative, plus absolute near 0 */
enum { kNormMaxThreads = 1024, kYKept = 4 };

typedef struct fn_shape {
  int rows, hidden;
  long long n; /* rows * hidden */
} fn_shape;

static fn_shape fn_decode(const mgpu_case *c) {
  fn_shape sh;
  sh.rows = (int)(c->n / kShape);
  sh.hidden = (int)(c->n % kShape);
  sh.n = (long long)sh.rows * sh.hidden;
  if (c->n <= 0 || sh.rows < 1 || sh.hidden < 1 || c->n / kShape > 1000000) {
    char msg[200];
    snprintf(msg, sizeof msg, "case %s: n = %lld is not rows * 1000000 + hidden with rows >= 1 and 1 <= hidden < 1000000",
             c->name, c->n);
    mgpu_fail("driver", "cases", __FILE__, __LINE__, 0, msg);
  }
  return sh;
}

/* The keys of iteration iter's residual and gamma: the same on every member, so not one rank's
 * exact inputs (a split rank has the key of its own only) but the run's pattern key, which every
 * rank and the verifier have (docs/protocol.md §4), salted with an id per array. */
static uint64_t fn_residual_key(const mgpu_ctx *ctx, int iter) { /* kResidualId in the high bits */
  return mgpu_pattern_key(ctx->seed, (int)((kResidualId << 16) ^ (unsigned int)iter));
}
static uint64_t fn_gamma_key(const mgpu_ctx *ctx, int iter) {
  return mgpu_pattern_key(ctx->seed, (int)((kGammaId << 16) ^ (unsigned int)iter));
}

static __host__ __device__ __forceinline__ float fn_eps(unsigned int e) { return 64.0f * (float)(1u << (2u * (e % 4u))); }

static __host__ __device__ __forceinline__ float fn_gamma(uint64_t key, long long i) {
  return (ar_exact(key, i) + 96.0f) / 128.0f;
}

static __global__ void k_fill_gamma(float *g, int hidden, uint64_t key) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hidden; i += gridDim.x * blockDim.x) g[i] = fn_gamma(key, i);
}

/* ---- the baseline's residual + RMSNorm (after ncclAllReduce of x into xsum) ---------------- */

static __device__ float fn_block_sum(float x, float *red) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  if (lane == 0) red[warp] = x;
  __syncthreads();
  x = lane < nwarps ? red[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  __syncthreads();
  return x;
}

/* A block per row: s = xsum + residual into residual_out and the sum of s^2, then out. */
template <bool VEC>
static __global__ void __launch_bounds__(kNormMaxThreads)
    k_base_norm(const float *__restrict__ xsum, const float *__restrict__ residual, const float *__restrict__ gamma,
                float eps, float *__restrict__ residual_out, float *__restrict__ out, int hidden) {
  __shared__ float red[32];
  const long long base = (long long)blockIdx.x * hidden;
  float sq = 0.0f;
  if (VEC) {
    const float4 *x4 = reinterpret_cast<const float4 *>(xsum + base), *r4 = reinterpret_cast<const float4 *>(residual + base);
    float4 *o4 = reinterpret_cast<float4 *>(residual_out + base);
    for (int i = threadIdx.x; i < hidden / 4; i += blockDim.x) {
      const float4 a = x4[i], b = r4[i];
      const float4 s = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
      o4[i] = s;
      sq += s.x * s.x + s.y * s.y + s.z * s.z + s.w * s.w;
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float s = xsum[base + i] + residual[base + i];
      residual_out[base + i] = s;
      sq += s * s;
    }
  }
  const float scale = rsqrtf(fn_block_sum(sq, red) / (float)hidden + eps);
  if (VEC) {
    const float4 *s4 = reinterpret_cast<const float4 *>(residual_out + base), *g4 = reinterpret_cast<const float4 *>(gamma);
    float4 *y4 = reinterpret_cast<float4 *>(out + base);
    for (int i = threadIdx.x; i < hidden / 4; i += blockDim.x) {
      const float4 s = s4[i], g = g4[i];
      y4[i] = make_float4(s.x * scale * g.x, s.y * scale * g.y, s.z * scale * g.z, s.w * scale * g.w);
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[base + i] = residual_out[base + i] * scale * gamma[i];
  }
}

static void fn_base_norm(const float *xsum, const float *residual, const float *gamma, float eps, float *residual_out,
                         float *out, int rows, int hidden, cudaStream_t stream) {
  const uintptr_t bits = (uintptr_t)xsum | (uintptr_t)residual | (uintptr_t)gamma | (uintptr_t)residual_out | (uintptr_t)out;
  const bool vec = hidden % 4 == 0 && (bits & 15) == 0;
  int threads = (hidden + (vec ? 15 : 3)) / (vec ? 16 : 4);
  threads = (threads + 31) / 32 * 32;
  if (threads < 32) threads = 32;
  if (threads > kNormMaxThreads) threads = kNormMaxThreads;
  if (vec)
    k_base_norm<true><<<rows, threads, 0, stream>>>(xsum, residual, gamma, eps, residual_out, out, hidden);
  else
    k_base_norm<false><<<rows, threads, 0, stream>>>(xsum, residual, gamma, eps, residual_out, out, hidden);
  MGPU_KERNEL();
}

/* ---- the comparison ------------------------------------------------------------------------- */

enum { FN_NO_RESIDUAL = C_COUNT, FN_MULTI_RESIDUAL }; /* residual_out classes of this driver's own */

typedef struct fn_ysample {
  long long i;
  unsigned int got;
} fn_ysample;

typedef struct fn_stats {
  ar_stats res; /* residual_out, classified as the all-reduce of x (allreduce_bench.cuh) on got - R */
  unsigned long long no_residual, multi_residual;
  unsigned int res_raw[8]; /* res.sample[x]'s value as stored in residual_out */
  unsigned long long y_bad, y_unwritten;
  unsigned long long y_max_abs, y_max_rel; /* bits of non-negative doubles (ordered like the doubles) */
  unsigned int y_nsample;
  fn_ysample y_sample[8];
} fn_stats;

/* The verifier's comparison of one epoch (or of the baseline's outputs), on the CPU. Per row: s
 * = R + the team's inputs (integers, exact in float), the row's sum of s^2 in double (exact:
 * integers below 2^53), then every element of residual_out (bit for bit) and of out (within
 * kRtol * |want| + kAtol of s * (mean + eps)^-1/2 * gamma, in double). full_res: every wrong
 * element of residual_out is classified (the session's first wrong epoch, which explains the
 * case); otherwise wrong elements are only counted. out's first 8 wrong elements by index are
 * kept. residual_out's samples: the first element of each class found, the most frequent classes
 * first, then more of the first wrong elements, at most 8 in all. row_r and row_xs: hidden
 * floats each, scratch. */
static void fn_compare_host(const float *residual_out, const float *out, const fn_shape *sh, const ar_keys *k,
                            uint64_t rkey, uint64_t gkey, float eps, int full_res, fn_stats *st, float *row_r,
                            float *row_xs) {
  enum { kClasses = C_COUNT + 2 };
  memset(st, 0, sizeof *st);
  st->res.first = st->res.unw_min = st->res.scr_min = ~0ULL;
  ar_sample firsts[kClasses], more[8];
  unsigned int raw_firsts[kClasses], raw_more[8];
  unsigned long long count[kClasses];
  int has_first[kClasses], nmore = 0;
  memset(count, 0, sizeof count);
  memset(has_first, 0, sizeof has_first);
  double max_abs = 0.0, max_rel = 0.0;
  for (int row = 0; row < sh->rows; row++) {
    const long long base = (long long)row * sh->hidden;
    double total = 0.0;
    for (int i = 0; i < sh->hidden; i++) {
      float xs = 0.0f;
      for (int m = 0; m < k->world; m++) xs += ar_value(k->cur[m], base + i);
      const float r = ar_exact(rkey, base + i);
      const float s = xs + r;
      row_r[i] = r;
      row_xs[i] = xs;
      total += (double)s * (double)s;
    }
    const double scale = 1.0 / sqrt(total / (double)sh->hidden + (double)eps);
    for (int i = 0; i < sh->hidden; i++) {
      const long long idx = base + i;
      const float xs = row_xs[i], r = row_r[i];
      const float want = xs + r;
      const float got = residual_out[idx];
      if (!(got == want)) {
        const unsigned int gb = ar_bits(got);
        if (st->res.first == ~0ULL) st->res.first = (unsigned long long)idx;
        if (!full_res) {
          if (gb == AR_OUT_POISON)
            st->res.unwritten++;
          else
            st->res.bad++;
        } else {
          unsigned int sbits = gb;
          int member = -1, cls;
          if (gb == AR_OUT_POISON || gb == AR_SCRATCH_POISON || gb == AR_DECOY_NAN || got != got) {
            cls = classify(got, want, idx, *k, &member);
          } else if (r != 0.0f && got == xs) {
            cls = FN_NO_RESIDUAL;
          } else if (r != 0.0f && k->world > 1 && got == xs + (float)k->world * r) {
            cls = FN_MULTI_RESIDUAL;
          } else {
            const float g2 = got - r;
            sbits = ar_bits(g2);
            cls = classify(g2, xs, idx, *k, &member);
          }
          count[cls]++;
          if (cls < C_COUNT) st->res.cls[cls]++;
          if (cls == C_UNWRITTEN) {
            st->res.unwritten++;
            if (st->res.unw_min == ~0ULL) st->res.unw_min = (unsigned long long)idx;
            st->res.unw_max = (unsigned long long)idx;
          } else {
            st->res.bad++;
            if (cls == C_SCRATCH) {
              if (st->res.scr_min == ~0ULL) st->res.scr_min = (unsigned long long)idx;
              st->res.scr_max = (unsigned long long)idx;
            }
          }
          ar_sample x;
          x.i = idx;
          x.got = sbits;
          x.cls = cls < C_COUNT ? cls : C_COUNT; /* never picked by ar_explain */
          x.member = member;
          if (!has_first[cls]) {
            firsts[cls] = x;
            raw_firsts[cls] = gb;
            has_first[cls] = 1;
          } else if (nmore < 8) {
            raw_more[nmore] = gb;
            more[nmore++] = x;
          }
        }
      }
      const double wy = (double)want * scale * (double)fn_gamma(gkey, i);
      const float gy = out[idx];
      const double err = fabs((double)gy - wy);
      if (isfinite(err)) { /* over every compared element, right ones included */
        max_abs = fmax(max_abs, err);
        if (wy != 0.0) max_rel = fmax(max_rel, err / fabs(wy));
      }
      if (ar_bits(gy) == AR_OUT_POISON) {
        st->y_unwritten++;
      } else if (!(err <= kRtol * fabs(wy) + kAtol)) {
        st->y_bad++;
      } else {
        continue;
      }
      if (st->y_nsample < 8) {
        st->y_sample[st->y_nsample].i = idx;
        st->y_sample[st->y_nsample].got = ar_bits(gy);
        st->y_nsample++;
      }
    }
  }
  st->no_residual = count[FN_NO_RESIDUAL];
  st->multi_residual = count[FN_MULTI_RESIDUAL];
  memcpy(&st->y_max_abs, &max_abs, sizeof max_abs);
  memcpy(&st->y_max_rel, &max_rel, sizeof max_rel);
  for (;;) { /* the classes' first elements, the most frequent class first */
    int best = -1;
    for (int c = 0; c < kClasses; c++)
      if (has_first[c] && (best < 0 || count[c] > count[best])) best = c;
    if (best < 0 || st->res.nsample >= 8) break;
    st->res_raw[st->res.nsample] = raw_firsts[best];
    st->res.sample[st->res.nsample++] = firsts[best];
    has_first[best] = 0;
  }
  for (int x = 0; x < nmore && st->res.nsample < 8; x++) {
    st->res_raw[st->res.nsample] = raw_more[x];
    st->res.sample[st->res.nsample++] = more[x];
  }
}

/* ---- one session's results -------------------------------------------------------------------- */

typedef struct fn_tally {
  ar_tally a;                  /* residual_out's epochs, as allreduce_bench.cuh explains them; a.r is the record */
  unsigned int res_raw[8];     /* a.samples' values as stored, same order */
  fn_stats res_first;          /* the first epoch with a wrong residual_out */
  int y_bad_epochs;
  unsigned int y_first_epoch; /* 0 when out was right in every epoch */
  int y_kept;                 /* the first kYKept epochs with a wrong out (their samples explain it) */
  unsigned int y_epoch[kYKept];
  int y_iter[kYKept];
  fn_stats y_st[kYKept];
  long long guard_res, guard_out;
  double max_abs, max_rel;
} fn_tally;

static void fn_tally_init(fn_tally *f, long long case_n) {
  memset(f, 0, sizeof *f);
  ar_tally_init(&f->a, case_n);
}

static double fn_bits_double(unsigned long long b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

/* The session's buffers and the team's view. */
typedef struct fn_bufs {
  fn_shape sh;
  mgpu_buf residual, gamma, residual_out, out;
} fn_bufs;

static void fn_bufs_alloc(fn_bufs *b, const fn_shape *sh, int device) {
  b->sh = *sh;
  b->residual = mgpu_alloc(sizeof(float) * (size_t)sh->n, device);
  b->gamma = mgpu_alloc(sizeof(float) * (size_t)sh->hidden, device);
  b->residual_out = mgpu_alloc(sizeof(float) * (size_t)sh->n, device);
  b->out = mgpu_alloc(sizeof(float) * (size_t)sh->n, device);
}

static void fn_bufs_free(fn_bufs *b) {
  mgpu_free(&b->residual);
  mgpu_free(&b->gamma);
  mgpu_free(&b->residual_out);
  mgpu_free(&b->out);
}

/* Host buffers: residual_out's, for what is handed over (pinned in the rank; s->h_out of
 * allreduce_bench.cuh is out's), and the verifier's row scratch of fn_compare_host. */
static float *g_fn_hres, *g_fn_row_r, *g_fn_row_xs;

static void fn_alloc_host(const mgpu_ctx *ctx, long long max_n, int max_hidden) {
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMallocHost((void **)&g_fn_hres, sizeof(float) * (size_t)max_n));
    return;
  }
  g_fn_hres = (float *)malloc(sizeof(float) * (size_t)max_n);
  g_fn_row_r = (float *)malloc(sizeof(float) * (size_t)max_hidden);
  g_fn_row_xs = (float *)malloc(sizeof(float) * (size_t)max_hidden);
  if (!g_fn_hres || !g_fn_row_r || !g_fn_row_xs) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
}

static void fn_free_host(const mgpu_ctx *ctx) {
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFreeHost(g_fn_hres));
  } else {
    free(g_fn_hres);
    free(g_fn_row_r);
    free(g_fn_row_xs);
  }
}

/* The rank reads residual_out and out back (from the snapshots or the buffers, on `stream`)
 * and hands both over as "<tag>/residual_out" and "<tag>/out"; returns 1 where they are to be
 * compared (the verifier; a program run without one). */
static int fn_hand_over(ar_state *s, const float *res_dev, const float *out_dev, long long n, const char *tag) {
  const size_t bytes = sizeof(float) * (size_t)n;
  char t[160];
  if (mgpu_computes(s->ctx)) {
    AR_CUDA(cudaMemcpyAsync(g_fn_hres, res_dev, bytes, cudaMemcpyDeviceToHost, s->stream));
    AR_CUDA(cudaMemcpyAsync(s->h_out, out_dev, bytes, cudaMemcpyDeviceToHost, s->stream));
    AR_CUDA(cudaStreamSynchronize(s->stream));
  }
  snprintf(t, sizeof t, "%s/residual_out", tag);
  mgpu_hand_over(s->ctx, t, g_fn_hres, bytes);
  snprintf(t, sizeof t, "%s/out", tag);
  return mgpu_hand_over(s->ctx, t, s->h_out, bytes);
}

static void fn_sort_samples(ar_sample *sm, unsigned int *raw, int ns) {
  for (int x = 1; x < ns; x++)
    for (int y = x; y > 0 && sm[y].i < sm[y - 1].i; y--) {
      ar_sample tmp = sm[y];
      sm[y] = sm[y - 1];
      sm[y - 1] = tmp;
      unsigned int rt = raw[y];
      raw[y] = raw[y - 1];
      raw[y - 1] = rt;
    }
}

/* Adds epoch j's comparison (learner epoch e) to *f. */
static void fn_tally_epoch(fn_tally *f, const fn_stats *st, unsigned int e, int iter_base, long long n) {
  ar_tally *a = &f->a;
  a->epochs++;
  a->r.checked += 2 * n;
  a->r.bad += (long long)(st->res.bad + st->y_bad);
  a->r.unwritten += (long long)(st->res.unwritten + st->y_unwritten);
  const double ea = fn_bits_double(st->y_max_abs), er = fn_bits_double(st->y_max_rel);
  if (ea > f->max_abs) f->max_abs = ea;
  if (er > f->max_rel) f->max_rel = er;
  if (st->y_bad + st->y_unwritten) {
    f->y_bad_epochs++;
    if (!f->y_first_epoch) f->y_first_epoch = e;
    if (f->y_kept < kYKept) {
      f->y_epoch[f->y_kept] = e;
      f->y_iter[f->y_kept] = iter_base + (int)e;
      f->y_st[f->y_kept] = *st;
      f->y_kept++;
    }
  }
  if (st->res.bad + st->res.unwritten == 0) return;
  a->bad_epochs++;
  if (a->first_epoch) return;
  a->first_epoch = e;
  a->first_iter = iter_base + (int)e;
  a->first = st->res;
  f->res_first = *st;
  const int ns = st->res.nsample < 8 ? (int)st->res.nsample : 8;
  memcpy(a->samples, st->res.sample, sizeof(ar_sample) * (size_t)ns);
  memcpy(f->res_raw, st->res_raw, sizeof(unsigned int) * (size_t)ns);
  fn_sort_samples(a->samples, f->res_raw, ns);
  a->nsamples = ns;
}

/* Epochs first_epoch .. first_epoch + count - 1 of a session named `name`. The rank queues them
 * (residual_out and out copied aside after each), waits, and hands each epoch's pair over as
 * "<name>/<j>/residual_out" and "<name>/<j>/out"; the verifier compares each pair and adds it to
 * *f. Both take the same count. */
/* The guard counts of residual_out and out, counted by the rank and handed over as
 * "<name>/guards"; where the check is made, they go into *f. */
static void fn_guards(mgpu_ctx *ctx, const fn_bufs *b, const char *name, fn_tally *f) {
  long long hits[2] = {0, 0};
  char tag[128];
  if (mgpu_computes(ctx)) {
    hits[0] = mgpu_guard_hits(&b->residual_out);
    hits[1] = mgpu_guard_hits(&b->out);
  }
  snprintf(tag, sizeof tag, "%s/guards", name);
  if (!mgpu_hand_over(ctx, tag, hits, sizeof hits)) return;
  f->guard_res = hits[0];
  f->guard_out = hits[1];
}

static void fn_run_epochs(ar_state *s, const ar_team *t, const ar_view *v, fn_bufs *b, unsigned int first_epoch, int count,
                          int iter_base, int roles, fn_tally *f, const char *name) {
  mgpu_ctx *ctx = s->ctx;
  const int g = ctx->rank;
  const fn_shape *sh = &b->sh;
  const long long n = sh->n;
  const size_t bytes = sizeof(float) * (size_t)n;
  if (count > kMaxEpochs) count = kMaxEpochs;
  if (mgpu_computes(ctx)) {
    if (2LL * count * n > s->snap_floats)
      mgpu_fail("driver", "fn_run_epochs", __FILE__, __LINE__, 0, "the snapshots do not fit (a course bug)");
    g_ar_team = t;
    g_ar_n = n;
    float *res = (float *)b->residual.ptr, *gam = (float *)b->gamma.ptr;
    float *res_out = (float *)b->residual_out.ptr, *out = (float *)b->out.ptr;
    for (int j = 0; j < count; j++) {
      const int k = j + 1;
      const unsigned int e = first_epoch + (unsigned int)j;
      const int iter = iter_base + (int)e;
      const int who = (k / 3) % t->world;
      const int ordering = roles && k % 3 == 1 && who == t->me;
      const int stress = roles && k % 3 == 2 && who == t->me && t->world > 1;
      k_fill_exact<<<ar_grid(n), 256, 0, s->stream>>>(res, n, fn_residual_key(ctx, iter));
      AR_KERNEL();
      k_fill_gamma<<<ar_grid(sh->hidden), 256, 0, s->stream>>>(gam, sh->hidden, fn_gamma_key(ctx, iter));
      AR_KERNEL();
      if (ordering) mgpu_delay(s->stream, kDelayNs);
      k_fill_value<<<ar_grid(n), 256, 0, s->stream>>>(ar_in(s, g), n, mgpu_exact_key(ctx->seed, g, iter));
      AR_KERNEL();
      AR_CUDA(cudaMemsetAsync(res_out, 0xFF, bytes, s->stream));
      AR_CUDA(cudaMemsetAsync(out, 0xFF, bytes, s->stream));
      if (stress) ar_hog(s);
      MGPU_LEARNER(fused_allreduce_rmsnorm(v, res, gam, fn_eps(e), res_out, out, sh->rows, sh->hidden, e, s->stream));
      ar_expect_no_pending_error();
      k_fill_f32<<<ar_grid(n), 256, 0, s->stream>>>(ar_in(s, g), n, ar_marker(e));
      AR_KERNEL();
      float *snap = s->d_snap + 2 * (size_t)j * (size_t)n;
      AR_CUDA(cudaMemcpyAsync(snap, res_out, bytes, cudaMemcpyDeviceToDevice, s->stream));
      AR_CUDA(cudaMemcpyAsync(snap + n, out, bytes, cudaMemcpyDeviceToDevice, s->stream));
    }
    ar_wait(s, t, n);
    AR_CUDA(cudaStreamSynchronize(s->hog_stream));
    g_ar_last = *t;
    g_ar_team = NULL;
  }
  for (int j = 0; j < count; j++) {
    char tag[128];
    const float *snap = mgpu_computes(ctx) ? s->d_snap + 2 * (size_t)j * (size_t)n : NULL;
    snprintf(tag, sizeof tag, "%s/%d", name, j);
    if (!fn_hand_over(s, snap, snap ? snap + n : NULL, n, tag)) continue;
    const unsigned int e = first_epoch + (unsigned int)j;
    const int iter = iter_base + (int)e;
    const ar_keys keys = ar_keys_for(ctx, t, iter, e, j, count);
    fn_stats st;
    fn_compare_host(g_fn_hres, s->h_out, sh, &keys, fn_residual_key(ctx, iter), fn_gamma_key(ctx, iter), fn_eps(e),
                    f->a.first_epoch == 0, &st, g_fn_row_r, g_fn_row_xs);
    fn_tally_epoch(f, &st, e, iter_base, n);
  }
}

/* ---- explanations -------------------------------------------------------------------------- */

/* Replaces every `from` in dst (NUL-terminated, `len` bytes) with `to`, truncating at len - 1. */
static void fn_replace(char *dst, size_t len, const char *from, const char *to) {
  char tmp[1024];
  size_t used = 0;
  const size_t fl = strlen(from), tl = strlen(to);
  for (const char *p = dst; *p && used + 1 < sizeof tmp;) {
    if (strncmp(p, from, fl) == 0 && used + tl + 1 < sizeof tmp) {
      memcpy(tmp + used, to, tl);
      used += tl;
      p += fl;
    } else {
      tmp[used++] = *p++;
    }
  }
  tmp[used] = 0;
  snprintf(dst, len, "%s", tmp);
}

/* What one row holds, computed on the host from the exact values. */
typedef struct fn_row {
  int row;
  double ms, ms_own, ms_ownx, ms_nores, sumsq; /* means of squares (and the plain sum) */
} fn_row;

static float fn_host_x(const mgpu_ctx *ctx, const ar_team *t, int m, int iter, long long idx) {
  return mgpu_fine_value(ctx->seed, t->member[m], iter, idx);
}

static void fn_row_stats(const mgpu_ctx *ctx, const ar_team *t, const fn_shape *sh, int iter, int row, fn_row *rs) {
  const uint64_t rkey = fn_residual_key(ctx, iter);
  double ss = 0, so = 0, sx = 0, sn = 0;
  for (int i = 0; i < sh->hidden; i++) {
    const long long idx = (long long)row * sh->hidden + i;
    float xs = 0.0f;
    for (int m = 0; m < t->world; m++) xs += fn_host_x(ctx, t, m, iter, idx);
    const float r = ar_exact(rkey, idx);
    const float own = fn_host_x(ctx, t, t->me, iter, idx);
    ss += (double)(xs + r) * (xs + r);
    so += (double)(own + r) * (own + r);
    sx += (double)own * own;
    sn += (double)xs * xs;
  }
  rs->row = row;
  rs->sumsq = ss;
  rs->ms = ss / sh->hidden;
  rs->ms_own = so / sh->hidden;
  rs->ms_ownx = sx / sh->hidden;
  rs->ms_nores = sn / sh->hidden;
}

enum { H_EPS_OUT, H_NO_EPS, H_NO_GAMMA, H_OWN_STAT, H_OWNX_STAT, H_OWN_ONLY, H_NORES_STAT, H_NORES, H_SUM, H_COUNT };

static double fn_hypothesis(int h, const fn_row *rs, double s, double xs, double own, double g, double eps) {
  switch (h) {
  case H_EPS_OUT: return s / (sqrt(rs->ms) + eps) * g;
  case H_NO_EPS: return s / sqrt(rs->ms) * g;
  case H_NO_GAMMA: return s / sqrt(rs->ms + eps);
  case H_OWN_STAT: return s / sqrt(rs->ms_own + eps) * g;
  case H_OWNX_STAT: return s / sqrt(rs->ms_ownx + eps) * g;
  case H_OWN_ONLY: return own / sqrt(rs->ms_own + eps) * g;
  case H_NORES_STAT: return s / sqrt(rs->ms_nores + eps) * g;
  case H_NORES: return xs / sqrt(rs->ms_nores + eps) * g;
  default: return s / sqrt(rs->sumsq + eps) * g;
  }
}

static const char *const kHypothesisText[H_COUNT] = {
    "it matches s / (sqrt(mean(s^2)) + eps) * gamma: eps goes inside the root, rsqrt(mean(s^2) + eps)",
    "it matches s * rsqrt(mean(s^2)) * gamma: eps was left out (the driver's eps is as large as mean(s^2), so it shows)",
    "it matches s * rsqrt(mean(s^2) + eps) without the weight: multiply by gamma[i]",
    "it matches a norm whose mean(s^2) came from this member's own part (its own input plus the residual) instead of the "
    "full sum: the row's statistic can only be taken once every member's input is added in",
    "it matches a norm whose mean(s^2) came from this member's own input alone: the row's statistic is of s, the full sum "
    "plus the residual",
    "it is this member's own part (its own input plus the residual) normalized: sum every member's input first",
    "it matches a norm whose mean(s^2) left the residual out: the statistic is of s = sum of the inputs + residual",
    "it is the all-reduced input normalized without the residual: normalize s = sum of the inputs + residual",
    "it matches s * rsqrt(sum(s^2) + eps) * gamma: divide the sum of squares by hidden",
};

/* One wrong element of out, with what the host knows about it. */
typedef struct fn_ypoint {
  long long i;
  unsigned int got;
  double eps, s, xs, own, g, want;
  int row; /* index into the rows computed */
} fn_ypoint;

/* out is wrong while residual_out is right: which mistake explains the samples of the first
 * kYKept wrong epochs (each its own eps and data, so that no coincidence of one element decides)? */
static void fn_explain_out(const mgpu_ctx *ctx, const ar_team *t, const fn_shape *sh, fn_tally *f, long long case_n) {
  mgpu_result *r = &f->a.r;
  enum { kMaxPoints = 8 * kYKept };
  fn_ypoint pt[kMaxPoints];
  fn_row rows[kMaxPoints];
  int row_iter[kMaxPoints];
  int np = 0, nrows = 0, poisoned = 0, first_count = 0;
  for (int k = 0; k < f->y_kept; k++) {
    const fn_stats *st = &f->y_st[k];
    const int iter = f->y_iter[k];
    const double eps = fn_eps(f->y_epoch[k]);
    const uint64_t gkey = fn_gamma_key(ctx, iter);
    const int ns = st->y_nsample < 8 ? (int)st->y_nsample : 8;
    fn_ysample sm[8];
    memcpy(sm, st->y_sample, sizeof(fn_ysample) * (size_t)ns);
    for (int x = 1; x < ns; x++)
      for (int y = x; y > 0 && sm[y].i < sm[y - 1].i; y--) {
        fn_ysample tmp = sm[y];
        sm[y] = sm[y - 1];
        sm[y - 1] = tmp;
      }
    for (int x = 0; x < ns; x++) {
      fn_ypoint *q = &pt[np++];
      const int row = (int)(sm[x].i / sh->hidden);
      int j = 0;
      while (j < nrows && !(rows[j].row == row && row_iter[j] == iter)) j++;
      if (j == nrows) {
        fn_row_stats(ctx, t, sh, iter, row, &rows[nrows]);
        row_iter[nrows++] = iter;
      }
      float xs = 0.0f;
      for (int m = 0; m < t->world; m++) xs += fn_host_x(ctx, t, m, iter, sm[x].i);
      const float rv = ar_exact(fn_residual_key(ctx, iter), sm[x].i);
      q->i = sm[x].i;
      q->got = sm[x].got;
      q->eps = eps;
      q->row = j;
      q->s = (double)(xs + rv);
      q->xs = xs;
      q->own = (double)(fn_host_x(ctx, t, t->me, iter, sm[x].i) + rv);
      q->g = fn_gamma(gkey, sm[x].i % sh->hidden);
      q->want = q->s / sqrt(rows[j].ms + eps) * q->g;
      poisoned += sm[x].got == AR_OUT_POISON;
    }
    if (k == 0) first_count = np;
  }
  r->nfirst = 0;
  for (int x = 0; x < first_count; x++) {
    mgpu_mismatch *mm = &r->first[r->nfirst++];
    mm->i = pt[x].i;
    ar_fmt_float(mm->got, sizeof mm->got, pt[x].got);
    snprintf(mm->want, sizeof mm->want, "%.9g", pt[x].want);
  }
  const fn_stats *st0 = &f->y_st[0];
  char what[400];
  if (np == 0) {
    snprintf(what, sizeof what, "out is wrong (no sample kept)");
  } else if (st0->y_unwritten >= st0->y_bad || poisoned == np) {
    snprintf(what, sizeof what,
             "%llu element(s) of out still held the driver's poison (out[%lld] first among those kept): write out for every "
             "element of every row, on `stream`",
             st0->y_unwritten, pt[0].i);
  } else {
    int found = -1;
    for (int h = 0; h < H_COUNT && found < 0; h++) {
      if (t->world < 2 && (h == H_OWN_STAT || h == H_OWN_ONLY)) continue; /* the right answer on a team of one */
      int all = 1;
      for (int x = 0; x < np && all; x++) {
        float got;
        memcpy(&got, &pt[x].got, 4);
        const double hv = fn_hypothesis(h, &rows[pt[x].row], pt[x].s, pt[x].xs, pt[x].own, pt[x].g, pt[x].eps);
        all = (got != got && hv != hv) || fabs((double)got - hv) <= kRtol * fabs(hv) + kAtol;
      }
      if (all) found = h;
    }
    float got0;
    memcpy(&got0, &pt[0].got, 4);
    if (found >= 0)
      snprintf(what, sizeof what, "out[%lld] (row %lld) is %.9g, want %.9g; %s", pt[0].i, pt[0].i / sh->hidden, got0,
               pt[0].want, kHypothesisText[found]);
    else
      snprintf(what, sizeof what,
               "out[%lld] (row %lld) is %.9g, want %.9g (tolerance %g relative): compute s * rsqrt(sum(s^2) / hidden + eps) * "
               "gamma[i] per row, the sum over every element of the row (all threads' parts), s as in residual_out",
               pt[0].i, pt[0].i / sh->hidden, got0, pt[0].want, kRtol);
  }
  snprintf(r->msg, sizeof r->msg,
           "%s, %d x %d (case n = %lld): residual_out is right, out is wrong in %d of %d epochs, first epoch %u (eps %g): %s.",
           t->desc, sh->rows, sh->hidden, case_n, f->y_bad_epochs, f->a.epochs, f->y_first_epoch, fn_eps(f->y_first_epoch),
           what);
}

/* The record's message and first mismatches. */
static void fn_explain(const mgpu_ctx *ctx, const ar_team *t, const fn_shape *sh, fn_tally *f, long long case_n) {
  ar_tally *a = &f->a;
  mgpu_result *r = &a->r;
  r->max_abs_err = f->max_abs;
  r->max_rel_err = f->max_rel;
  if (a->first_epoch) {
    /* residual_out: its mismatches, then the explanation. */
    r->nfirst = 0;
    for (int x = 0; x < a->nsamples; x++) {
      mgpu_mismatch *mm = &r->first[r->nfirst++];
      float want = ar_exact(fn_residual_key(ctx, a->first_iter), a->samples[x].i);
      for (int m = 0; m < t->world; m++) want += fn_host_x(ctx, t, m, a->first_iter, a->samples[x].i);
      mm->i = a->samples[x].i;
      ar_fmt_float(mm->got, sizeof mm->got, f->res_raw[x]);
      snprintf(mm->want, sizeof mm->want, "%.9g", want);
    }
    const fn_stats *st = &f->res_first;
    unsigned long long most = 0;
    for (int c = 1; c < C_COUNT; c++)
      if (st->res.cls[c] > most) most = st->res.cls[c];
    if (st->no_residual + st->multi_residual > most) {
      snprintf(r->msg, sizeof r->msg,
               "%s, %d x %d (case n = %lld): residual_out is wrong in %d of %d epochs, first epoch %u: %s.", t->desc, sh->rows,
               sh->hidden, case_n, a->bad_epochs, a->epochs, a->first_epoch,
               st->no_residual >= st->multi_residual
                   ? "residual_out is the sum of the members' inputs without the residual: add residual[i] (once)"
                   : "the residual was added once per member: the members' inputs are summed, the residual (the same on "
                     "every member) is added once");
    } else {
      ar_explain(ctx, t, sh->n, a);
      char from[64], to[96];
      snprintf(from, sizeof from, ", n = %lld:", sh->n);
      snprintf(to, sizeof to, ", %d x %d (case n = %lld): residual_out is wrong:", sh->rows, sh->hidden, case_n);
      fn_replace(r->msg, sizeof r->msg, from, to);
      fn_replace(r->msg, sizeof r->msg, "out[", "residual_out[");
      fn_replace(r->msg, sizeof r->msg, "element(s) of out,", "element(s) of residual_out,");
      fn_replace(r->msg, sizeof r->msg, "reads out there", "reads residual_out there");
    }
    return;
  }
  if (f->y_first_epoch) {
    fn_explain_out(ctx, t, sh, f, case_n);
    return;
  }
  if (f->guard_res || f->guard_out)
    snprintf(r->msg, sizeof r->msg,
             "%s, %d x %d: %lld byte(s) written outside residual_out[0..rows*hidden) and %lld outside out[0..rows*hidden): "
             "write the rows x hidden elements of each and nothing else",
             t->desc, sh->rows, sh->hidden, f->guard_res, f->guard_out);
}

/* ---- the correctness sessions ------------------------------------------------------------------ */

/* One (case, layout). Hand-overs: "<name>/<j>/residual_out" and "<name>/<j>/out" per epoch
 * (fn_run_epochs), then "<name>/guards" (residual_out's and out's guard bytes hit). */
static void fn_run_case(ar_state *s, const mgpu_case *c, const char *layout) {
  mgpu_ctx *ctx = s->ctx;
  const fn_shape sh = fn_decode(c);
  const ar_team t = ar_make_team(ctx, layout);
  char name[96], tag[128];
  ar_case_name(name, sizeof name, c, layout);
  ar_view v;
  fn_bufs b;
  memset(&v, 0, sizeof v);
  memset(&b, 0, sizeof b);
  b.sh = sh;
  if (mgpu_computes(ctx)) {
    ar_begin_session(s, &t, sh.n);
    v = ar_view_for(s, &t);
    fn_bufs_alloc(&b, &sh, ctx->device);
  }
  fn_tally f;
  fn_tally_init(&f, c->n);
  const int sess = ++s->sessions;
  fn_run_epochs(s, &t, &v, &b, 1, epochs_for(sh.n), sess * 1000, 1, &f, name);
  fn_guards(ctx, &b, name, &f);
  if (mgpu_verifies(ctx)) {
    f.a.r.n = c->n;
    f.a.r.guard_hits = f.guard_res + f.guard_out;
    fn_explain(ctx, &t, &sh, &f, c->n);
    mgpu_record_case(name, &f.a.r, 0);
  }
  if (mgpu_computes(ctx)) fn_bufs_free(&b);
}

/* ---- timing ------------------------------------------------------------------------------------ */

typedef struct fn_perf {
  ar_view v;
  const float *in, *residual, *gamma;
  float *xsum, *residual_out, *out;
  float eps;
  int rows, hidden;
  unsigned int epoch;
  ncclComm_t comm;
  ar_probes pr; /* residual_out probed between timed calls (allreduce_bench.cuh) */
} fn_perf;

static __global__ void k_add_f32(float *dst, const float *src, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] += src[i];
}

static void op_fused(void *arg, int iter, cudaStream_t stream) {
  fn_perf *p = (fn_perf *)arg;
  (void)iter;
  const unsigned int e = ++p->epoch;
  const uint64_t k = ar_probe_before(&p->pr, stream);
  MGPU_LEARNER(fused_allreduce_rmsnorm(&p->v, p->residual, p->gamma, p->eps, p->residual_out, p->out, p->rows, p->hidden,
                                       e, stream));
  ar_expect_no_pending_error();
  ar_probe_after(&p->pr, 0, p->residual_out, k, stream);
}

static void op_nccl_norm(void *arg, int iter, cudaStream_t stream) {
  fn_perf *p = (fn_perf *)arg;
  (void)iter;
  const size_t n = (size_t)p->rows * (size_t)p->hidden;
  const uint64_t k = ar_probe_before(&p->pr, stream);
  MGPU_NCCL_OWN(ncclAllReduce(p->in, p->xsum, n, ncclFloat, ncclSum, p->comm, stream));
  fn_base_norm(p->xsum, p->residual, p->gamma, p->eps, p->residual_out, p->out, p->rows, p->hidden, stream);
  ar_probe_after(&p->pr, 1, p->residual_out, k, stream);
}

/* One perf case. The rank runs the baseline once and hands its outputs over
 * ("baseline/<case>/residual_out", "baseline/<case>/out": the verifier stops the run if they are
 * wrong, a course bug), times, then checks kAfterTimingEpochs more epochs: hand-overs
 * "after-timing/<case>/epoch" (the last epoch the timed calls used), the epochs' pairs
 * "after-timing/<case>/<j>/...", then "after-timing/<case>/guards". The verifier adds them to
 * *after. */
static void fn_run_perf(ar_state *s, const mgpu_case *c, ncclComm_t comm, fn_tally *after) {
  mgpu_ctx *ctx = s->ctx;
  const fn_shape sh = fn_decode(c);
  const long long n = sh.n;
  const ar_team t = ar_make_team(ctx, "all");
  const int sess = ++s->sessions;
  const int iter = sess * 1000;
  const float eps = fn_eps(1);
  char name[96], tag[128];
  fn_bufs b;
  memset(&b, 0, sizeof b);
  b.sh = sh;
  float *xsum = NULL;
  fn_perf p;
  memset(&p, 0, sizeof p);
  ar_probe probes[2];
  memset(probes, 0, sizeof probes);
  if (mgpu_computes(ctx)) {
    ar_begin_session(s, &t, n);
    fn_bufs_alloc(&b, &sh, ctx->device);
    MGPU_CUDA(cudaMalloc((void **)&xsum, sizeof(float) * (size_t)n));
    mgpu_fill_fine_f32(ar_in(s, ctx->rank), n, ctx->seed, ctx->rank, iter, s->stream);
    k_fill_exact<<<ar_grid(n), 256, 0, s->stream>>>((float *)b.residual.ptr, n, fn_residual_key(ctx, iter));
    MGPU_KERNEL();
    k_fill_gamma<<<ar_grid(sh.hidden), 256, 0, s->stream>>>((float *)b.gamma.ptr, sh.hidden, fn_gamma_key(ctx, iter));
    MGPU_KERNEL();
    MGPU_CUDA(cudaStreamSynchronize(s->stream));
    mgpu_barrier(ctx, "m6-perf-filled");

    p.v = ar_view_for(s, &t);
    p.in = ar_in(s, ctx->rank);
    p.residual = (const float *)b.residual.ptr;
    p.gamma = (const float *)b.gamma.ptr;
    p.xsum = xsum;
    p.residual_out = (float *)b.residual_out.ptr;
    p.out = (float *)b.out.ptr;
    p.eps = eps;
    p.rows = sh.rows;
    p.hidden = sh.hidden;
    p.comm = comm;

    /* The baseline must be right before it is timed: its outputs go to the verifier. */
    MGPU_CUDA(cudaMemsetAsync(p.residual_out, 0xFF, sizeof(float) * (size_t)n, s->stream));
    MGPU_CUDA(cudaMemsetAsync(p.out, 0xFF, sizeof(float) * (size_t)n, s->stream));
    op_nccl_norm(&p, 0, s->stream);
  }
  snprintf(tag, sizeof tag, "baseline/%s", c->name);
  if (fn_hand_over(s, p.residual_out, p.out, n, tag)) {
    fn_stats st;
    const ar_keys keys = ar_keys_for(ctx, &t, iter, 1, 0, 1); /* one epoch */
    fn_compare_host(g_fn_hres, s->h_out, &sh, &keys, fn_residual_key(ctx, iter), fn_gamma_key(ctx, iter), eps, 0, &st,
                    g_fn_row_r, g_fn_row_xs);
    if (st.res.bad + st.res.unwritten + st.y_bad + st.y_unwritten) {
      char msg[300];
      snprintf(msg, sizeof msg,
               "the baseline (ncclAllReduce + the driver's residual + RMSNorm) is wrong for %d x %d: %llu residual_out and "
               "%llu out element(s); a bug in the course",
               sh.rows, sh.hidden, st.res.bad + st.res.unwritten, st.y_bad + st.y_unwritten);
      mgpu_fail("driver", "baseline", __FILE__, __LINE__, 0, msg);
    }
  }

  if (mgpu_computes(ctx)) {
    mgpu_barrier(ctx, "m6-perf-baseline-ok");
    /* The probes' reference: NCCL's sum of the starting inputs plus the residual. */
    snprintf(tag, sizeof tag, "m6-probe-key/%s", c->name);
    ar_probes_begin(ctx, &p.pr, ar_in(s, ctx->rank), NULL, n, tag);
    MGPU_NCCL_OWN(ncclAllReduce(p.in, p.pr.ref, (size_t)n, ncclFloat, ncclSum, comm, s->stream));
    k_add_f32<<<ar_grid(n), 256, 0, s->stream>>>(p.pr.ref, p.residual, n);
    MGPU_KERNEL();
    MGPU_CUDA(cudaStreamSynchronize(s->stream));
    mgpu_timing tm;
    memset(&tm, 0, sizeof tm);
    tm.case_name = c->name;
    tm.bytes = (double)n * sizeof(float);
    tm.factor = 1.0;
    tm.metric = "time";
    mgpu_time_pair(ctx, &tm, op_fused, &p, op_nccl_norm, &p, s->stream);
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
  snprintf(name, sizeof name, "after-timing/%s", c->name);
  snprintf(tag, sizeof tag, "%s/epoch", name);
  mgpu_hand_over(ctx, tag, &p.epoch, sizeof p.epoch);
  fn_tally f;
  fn_tally_init(&f, c->n);
  fn_run_epochs(s, &t, &p.v, &b, p.epoch + 1, kAfterTimingEpochs, sess * 1000 + 500, 0, &f, name);
  fn_guards(ctx, &b, name, &f);
  if (mgpu_verifies(ctx)) {
    f.a.r.guard_hits = f.guard_res + f.guard_out;
    mgpu_result *ar = &after->a.r;
    ar->checked += f.a.r.checked;
    ar->bad += f.a.r.bad;
    ar->unwritten += f.a.r.unwritten;
    ar->guard_hits += f.a.r.guard_hits;
    if (f.max_abs > ar->max_abs_err) ar->max_abs_err = f.max_abs;
    if (f.max_rel > ar->max_rel_err) ar->max_rel_err = f.max_rel;
    if (!ar->msg[0] && (f.a.r.bad || f.a.r.unwritten || f.a.r.guard_hits)) {
      fn_explain(ctx, &t, &sh, &f, c->n);
      ar->nfirst = f.a.r.nfirst;
      memcpy(ar->first, f.a.r.first, sizeof f.a.r.first);
      snprintf(ar->msg, sizeof ar->msg, "after timing %s (epochs %u..): %.400s", c->name, p.epoch + 1, f.a.r.msg);
    }
  }
  ar_probes_verdict(ctx, name, c->name, probes, "residual_out", "the sum of the inputs plus the residual", &after->a.r);
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFree(xsum));
    fn_bufs_free(&b);
  }
}

/* ---- main ---------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  /* The shapes of this run decide the buffers (every case is decoded here, so a bad one fails
   * first): the largest n and hidden, and the most floats of snapshots one session takes (two
   * outputs per epoch). */
  long long max_n = 1, snap = 1;
  int max_hidden = 1;
  for (int k = 0; k < ctx.ncases; k++) {
    const fn_shape sh = fn_decode(&ctx.cases[k]);
    const long long e = epochs_for(sh.n) < kMaxEpochs ? epochs_for(sh.n) : kMaxEpochs;
    if (sh.n > max_n) max_n = sh.n;
    if (sh.hidden > max_hidden) max_hidden = sh.hidden;
    if (2 * e * sh.n > snap) snap = 2 * e * sh.n;
  }
  if (ctx.perf)
    for (int k = 0; k < ctx.nperf_cases; k++) {
      const fn_shape sh = fn_decode(&ctx.perf_cases[k]);
      if (sh.n > max_n) max_n = sh.n;
      if (sh.hidden > max_hidden) max_hidden = sh.hidden;
      if (2LL * kAfterTimingEpochs * sh.n > snap) snap = 2LL * kAfterTimingEpochs * sh.n;
    }
  ar_state s;
  ar_setup(&s, &ctx, max_n, "module6-fn");
  ar_alloc_outputs(&s, snap);
  fn_alloc_host(&ctx, max_n, max_hidden);

  const char *layouts[3];
  const int nlayouts = ar_layouts(&ctx, layouts);
  for (int k = 0; k < ctx.ncases; k++)
    for (int l = 0; l < nlayouts; l++) fn_run_case(&s, &ctx.cases[k], layouts[l]);

  if (ctx.perf && ctx.nperf_cases > 0) {
    ncclComm_t comm = NULL;
    if (mgpu_computes(&ctx)) comm = ar_baseline_comm(&ctx);
    fn_tally after;
    fn_tally_init(&after, 0);
    for (int k = 0; k < ctx.nperf_cases; k++) fn_run_perf(&s, &ctx.perf_cases[k], comm, &after);
    if (mgpu_verifies(&ctx)) mgpu_record_case("after-timing", &after.a.r, 0);
    if (mgpu_computes(&ctx)) {
      MGPU_CUDA(cudaDeviceSynchronize());
      MGPU_NCCL(ncclCommDestroy(comm));
    }
  }

  ar_teardown(&s);
  ar_free_outputs(&s);
  fn_free_host(&ctx);
  return mgpu_finish(&ctx);
}
