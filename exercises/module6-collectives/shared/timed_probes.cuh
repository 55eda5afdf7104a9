/*
 * timed_probes.cuh: probes of the timed calls of module6's C all-reduces (course-owned; a support
 * file of one-shot, two-shot, fused-norm (through allreduce_bench.cuh) and nccl-device).
 * docs/harness.md §6 says what they are for. A driver calls, per perf case, in the rank:
 *   ar_probes_begin(ctx, &pr, own_in, own_in2 or NULL, n, tag)   collective; then fills pr.ref
 *   ar_probe_before(&pr, stream) / ar_probe_after(&pr, which, out, key, stream)   around each op
 *   ar_probes_end(&pr, host[2])                                   once the device is idle
 * and hands host[] over to its verifier, which judges them.
 * Define TP_KERNEL() before including to route launch errors (default MGPU_KERNEL()).
 */
#ifndef MODULE6_TIMED_PROBES_CUH
#define MODULE6_TIMED_PROBES_CUH

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TP_KERNEL
#define TP_KERNEL() MGPU_KERNEL()
#endif

static __host__ __device__ __forceinline__ uint64_t tp_mix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static __device__ __forceinline__ unsigned int tp_bits(float f) { return __float_as_uint(f); }

/* Probes of the timed calls. Between timed calls neither the inputs nor `out` change, so an op
 * that skipped its work whenever `out` held no poison (or whenever its own input had not
 * changed) would be right at every check and fast when timed. About one call in kProbeEvery (a
 * draw every rank makes alike from a key rank 0 hands out), yours and NCCL's alike: before the
 * call, one member drawn at random adds a small integer to its input at kProbeLanes random
 * places, and every rank adds the same to its reference (NCCL's sum of the starting inputs);
 * after it, out must equal the reference there. Only that member's input changed, so a rank
 * that looks only at its own memory cannot tell that this call counts. Two small kernels on the
 * stream per probed call, about 4 us every kProbeEvery calls, on both sides of the ratio. */
enum { kProbeEvery = 16, kProbeLanes = 32 };

typedef struct ar_probe {
  unsigned int bad, probes, call, pad;
  long long at;
  float got, want;
} ar_probe;

static __device__ __forceinline__ long long ar_probe_place(uint64_t key, long long n, uint64_t *h) {
  *h = tp_mix64(key ^ (0x70726f6265ULL + threadIdx.x));
  return (long long)(*h % (uint64_t)n);
}

/* Before a probed call (one warp): the reference, and the planting member's input, get the same
 * deltas at the same places (a place drawn twice takes one lane's delta). */
static __global__ void k_probe_plant(float *in, float *in2, float *ref, long long n, uint64_t key, int plant) {
  uint64_t h;
  const long long p = ar_probe_place(key, n, &h);
  const unsigned int same = __match_any_sync(0xffffffffu, (unsigned long long)p);
  if ((int)threadIdx.x != __ffs(same) - 1) return;
  const float d = (float)(1 + (int)((h >> 40) & 63u)) * (((h >> 47) & 1u) ? -1.0f : 1.0f);
  ref[p] += d;
  if (plant) in[p] += d;
  if (plant && in2) in2[p] += d;
}

/* After it: out at those places against the reference; the first miss is kept. */
static __global__ void k_probe_check(const float *out, const float *ref, long long n, uint64_t key, ar_probe *pr,
                                     unsigned int call) {
  uint64_t h;
  const long long p = ar_probe_place(key, n, &h);
  const float got = out[p], want = ref[p];
  if (tp_bits(got) != tp_bits(want) && atomicAdd(&pr->bad, 1u) == 0u) {
    pr->at = p;
    pr->got = got;
    pr->want = want;
    pr->call = call;
  }
  if (threadIdx.x == 0) atomicAdd(&pr->probes, 1u);
}

/* The probes of one perf case, in the rank. */
typedef struct ar_probes {
  uint64_t key;       /* from rank 0 */
  unsigned int calls; /* ops so far, yours and the baseline's */
  int rank, world;
  long long n;
  float *own_in, *own_in2; /* this rank's input (and a second copy the baseline reads, or NULL) */
  float *ref;              /* the reference (n floats, the caller fills it) */
  ar_probe *dev;       /* [0] yours, [1] the baseline's */
} ar_probes;

/* 64 bits from the kernel's random source (the time and the pid if it cannot be read). */
static uint64_t ar_random64(void) {
  uint64_t x = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (!f || fread(&x, sizeof x, 1, f) != 1) x = tp_mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
  if (f) fclose(f);
  return x;
}

/* Collective (every rank, the same tag): rank 0's key, the device tallies and the reference's
 * memory. own_in: this rank's input, which the probes change (and own_in2 alike, when the
 * baseline reads a copy of its own). */
static void ar_probes_begin(mgpu_ctx *ctx, ar_probes *pr, float *own_in, float *own_in2, long long n,
                            const char *tag) {
  memset(pr, 0, sizeof *pr);
  pr->rank = ctx->rank;
  pr->world = ctx->world;
  pr->n = n;
  pr->own_in = own_in;
  pr->own_in2 = own_in2;
  MGPU_CUDA(cudaMalloc((void **)&pr->ref, sizeof(float) * (size_t)n));
  MGPU_CUDA(cudaMalloc((void **)&pr->dev, 2 * sizeof(ar_probe)));
  MGPU_CUDA(cudaMemset(pr->dev, 0, 2 * sizeof(ar_probe)));
  if (ctx->rank == 0) pr->key = ar_random64();
  mgpu_share(ctx, tag, &pr->key, sizeof pr->key, 0);
}

/* The draw for the next op: its key, or 0 when it is not probed. A probed op's deltas go into the
 * reference on every rank and into the input of the member drawn. */
static uint64_t ar_probe_before(ar_probes *pr, cudaStream_t stream) {
  const uint64_t h = tp_mix64(pr->key ^ (uint64_t)++pr->calls);
  if (h % kProbeEvery != 0) return 0;
  const int plant = (int)((h >> 16) % (uint64_t)pr->world) == pr->rank;
  k_probe_plant<<<1, kProbeLanes, 0, stream>>>(pr->own_in, pr->own_in2, pr->ref, pr->n, h | 1u, plant);
  TP_KERNEL();
  return h | 1u;
}

/* After a probed op (key != 0): `out` against the reference at the places of `key`. */
static void ar_probe_after(ar_probes *pr, int which, const float *out, uint64_t key, cudaStream_t stream) {
  if (!key) return;
  k_probe_check<<<1, kProbeLanes, 0, stream>>>(out, pr->ref, pr->n, key, &pr->dev[which], pr->calls);
  TP_KERNEL();
}

/* Once the timed calls are done and the device is idle: the tallies, and the memory freed. */
static void ar_probes_end(ar_probes *pr, ar_probe host[2]) {
  MGPU_CUDA(cudaMemcpy(host, pr->dev, 2 * sizeof(ar_probe), cudaMemcpyDeviceToHost));
  MGPU_CUDA(cudaFree(pr->ref));
  MGPU_CUDA(cudaFree(pr->dev));
  pr->ref = NULL;
  pr->dev = NULL;
}

#endif /* MODULE6_TIMED_PROBES_CUH */
