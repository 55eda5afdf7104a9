/*
 * driver.cu: module5/flag-barrier (course-owned).
 *
 * One process per GPU (launcher "local"). Symmetric memory, the mechanism of module5/ipc-vmm
 * as the harness provides it to drivers (mgpu_symm_alloc: VMM allocations exported as file
 * descriptors and mapped by every rank): every rank's inbox (kInboxFloats floats) and flag
 * array, addressable from every GPU.
 *
 * Each case (n = floats of the tile) runs E epochs, E = min(64, kInboxFloats / n). Epoch e of
 * the whole run (epochs count on across cases, so the counters never need resetting) uses a
 * fresh slot of n floats of every inbox, poisoned (0xFF) before the case. Per epoch, on every
 * rank: the driver fills `mine` with exact values of (seed, rank, e), launches k_round
 * cooperatively (all blocks resident, the same grid on every rank), which calls the learner's
 * exchange_tile in every thread and then, right away, copies this rank's inbox slot into `out`
 * from back to front; then `out` is compared with the previous rank's values for e, every
 * element, bit for bit.
 *
 * Why a missing release shows: the tile is written by every block of the grid (all SMs, up to
 * 64 MiB per epoch over NVLink, which spreads the stores over its 18 links), and each block's
 * count is added by one thread immediately after the block's own stores. Without a release,
 * that count may reach the next GPU while stores issued just before it are still on their way
 * on other links; the reader, released by the last count, starts at once with the elements
 * the writers' grid-stride loops wrote last (back to front), and the slot is fresh poison, so
 * any element read early is caught as poison. Every epoch changes the data, and there are
 * hundreds of epochs over the cases. (To be confirmed on 2xH200, variant relaxed-flag.)
 * A kernel that waits forever is reported with mgpu_wait_or_hang, not by the job's timeout.
 *
 * The comparisons are each rank's verifier's (`verifier: true`, docs/protocol.md §4): the rank
 * hands over `out` after every epoch and the guard count of its buffers, and never knows the
 * previous rank's values; the verifier makes them on the CPU. k_round, which calls the learner's
 * device code, is compiled out of the verifier.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"

static const long long kInboxFloats = 1LL << 26; /* 256 MiB per rank */
static const int kMaxEpochs = 64;
static const double kHangS = 30.0;
static const uint32_t kPoison = 0xFFFFFFFFu;

#ifndef MGPU_VERIFIER
/* Copies this rank's slot into out, back to front, right after exchange_tile returns. */
__global__ void k_round(symm_view v, const float *mine, float *out, long long n, unsigned int epoch) {
  exchange_tile(&v, mine, n, epoch);
  const float *in = v.inbox[v.rank];
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = n - 1 - ((long long)blockIdx.x * blockDim.x + threadIdx.x); i >= 0; i -= stride)
    out[i] = in[i];
}

/* k_round on `grid` blocks of 512 threads, all resident (cooperative launch). */
static void launch_round(symm_view v, const float *mine, float *out, long long n, unsigned int epoch, int grid,
                         cudaStream_t stream) {
  void *args[] = {&v, &mine, &out, &n, &epoch};
  MGPU_CUDA(cudaLaunchCooperativeKernel((const void *)k_round, dim3((unsigned)grid), dim3(512), args, 0, stream));
}

/* How many blocks of k_round (512 threads) fit on one SM. */
static int round_blocks_per_sm(void) {
  int per_sm = 0;
  MGPU_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_round, 512, 0));
  return per_sm;
}
#endif

static void expect_no_pending_error(const char *fn) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s: %s (%s)", fn, cudaGetErrorName(e), cudaGetErrorString(e));
    mgpu_fail("learner", fn, __FILE__, __LINE__, (long)e, msg);
  }
}

/* ---- the cases ------------------------------------------------------------------------------ */

typedef struct world_maps {
  mgpu_symm inbox, flags; /* inbox.ptr[p], flags.ptr[p]: rank p's, as this process addresses it */
} world_maps;

/* Where the check is made: `got` (one epoch's out, n floats) against the previous rank's values
 * of epoch e, bit for bit, into r. The first bad epoch's first mismatches (within 4096 elements
 * of its first one) go into r->first. Returns whether this epoch had a mismatch. */
static int compare_epoch(const float *got, long long n, uint64_t want_key, int first_bad_epoch, mgpu_result *r) {
  long long first = -1;
  r->checked += n;
  for (long long i = 0; i < n; i++) {
    const float w = mgpu_fine_value_k(want_key, i);
    uint32_t gb, wb;
    memcpy(&gb, &got[i], sizeof gb);
    memcpy(&wb, &w, sizeof wb);
    if (gb == wb) continue;
    if (gb == kPoison)
      r->unwritten++;
    else
      r->bad++;
    if (first < 0) first = i;
    if (first_bad_epoch && i - first < 4096 && r->nfirst < 8) {
      mgpu_mismatch *mm = &r->first[r->nfirst++];
      mm->i = i;
      if (gb == kPoison)
        snprintf(mm->got, sizeof mm->got, "NaN(poison)");
      else
        snprintf(mm->got, sizeof mm->got, "%.9g", got[i]);
      snprintf(mm->want, sizeof mm->want, "%.9g", w);
    }
  }
  return first >= 0;
}

static void run_case(mgpu_ctx *ctx, const world_maps *m, const mgpu_case *c, unsigned int *epoch, int grid,
                     cudaStream_t stream) {
  const long long n = c->n;
  const size_t bytes = sizeof(float) * (size_t)n;
  const int prev = (ctx->rank + ctx->world - 1) % ctx->world;
  (void)grid; /* the rank's launch only */
  long long epochs = kInboxFloats / n;
  if (epochs > kMaxEpochs) epochs = kMaxEpochs;
  if (epochs < 1) mgpu_fail("driver", "cases", __FILE__, __LINE__, 0, "a tile larger than the inbox");

  mgpu_buf mine, out;
  memset(&mine, 0, sizeof mine);
  memset(&out, 0, sizeof out);
  float *host = NULL; /* one epoch's out: pinned in the rank, plain memory in the verifier */
  if (mgpu_computes(ctx)) {
    /* Fresh poison in this rank's inbox; everyone's is poisoned before anyone writes. */
    MGPU_CUDA(cudaMemsetAsync(m->inbox.ptr[ctx->rank], 0xFF, (size_t)(epochs * n) * sizeof(float), stream));
    MGPU_CUDA(cudaStreamSynchronize(stream));
    mgpu_barrier(ctx, "poisoned");
    mine = mgpu_alloc(bytes, ctx->device);
    out = mgpu_alloc(bytes, ctx->device);
    MGPU_CUDA(cudaMallocHost((void **)&host, bytes));
  } else {
    host = (float *)malloc(bytes);
    if (!host) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  }

  mgpu_result r;
  mgpu_result_init(&r, n * epochs);
  long long first_epoch = -1;
  for (long long k = 0; k < epochs; k++) {
    const unsigned int e = ++*epoch;
    if (mgpu_computes(ctx)) {
      symm_view v;
      memset(&v, 0, sizeof v);
      v.rank = ctx->rank;
      v.world = ctx->world;
      for (int p = 0; p < ctx->world; p++) {
        v.inbox[p] = (float *)m->inbox.ptr[p] + k * n;
        v.flags[p] = (unsigned int *)m->flags.ptr[p];
      }
      mgpu_fill_fine_f32((float *)mine.ptr, n, ctx->seed, ctx->rank, (int)e, stream);
      mgpu_poison(&out, stream);
      MGPU_LEARNER(launch_round(v, (const float *)mine.ptr, (float *)out.ptr, n, e, grid, stream));
      expect_no_pending_error("exchange_tile");
      mgpu_wait_or_hang(ctx, stream, kHangS, "exchange_tile",
                        "does every block's count reach the next rank, and does the wait target grow with the epoch (epoch x gridDim.x)?");
      MGPU_CUDA(cudaMemcpyAsync(host, out.ptr, bytes, cudaMemcpyDeviceToHost, stream));
      MGPU_CUDA(cudaStreamSynchronize(stream));
    }
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%u/out", c->name, e);
    if (!mgpu_hand_over(ctx, tag, host, bytes)) continue;
    if (compare_epoch(host, n, mgpu_exact_key(ctx->seed, prev, (int)e), first_epoch < 0, &r) && first_epoch < 0)
      first_epoch = (long long)e;
  }
  long long hits = 0;
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(&out) + mgpu_guard_hits(&mine);
  char tag[160];
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  if (mgpu_hand_over(ctx, tag, &hits, sizeof hits)) {
    r.guard_hits = hits;
    if (r.unwritten > 0)
      snprintf(r.msg, sizeof r.msg,
               "rank %d: %lld element(s) of the tiles from rank %d had not arrived when exchange_tile returned "
               "(still the poison; first in epoch %lld of the run, %lld epochs of %lld floats in this case). Does "
               "each block's signal come after its stores with release semantics at system scope, and does the "
               "wait acquire, at system scope, until every block of the previous rank has signalled this epoch?",
               ctx->rank, r.unwritten, prev, first_epoch, epochs, n);
    else if (r.bad > 0)
      snprintf(r.msg, sizeof r.msg,
               "rank %d: %lld element(s) of the inbox differ from what rank %d sent (first in epoch %lld): is the tile "
               "written into the next rank's inbox, v->inbox[(rank + 1) %% world], whole?",
               ctx->rank, r.bad, prev, first_epoch);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg, "rank %d: something wrote outside the driver's buffers", ctx->rank);
    mgpu_record_case(c->name, &r, 0);
  }

  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaFreeHost(host));
    mgpu_free(&mine);
    mgpu_free(&out);
    mgpu_barrier(ctx, "case-done"); /* nobody re-poisons while another rank still reads */
  } else {
    free(host);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  if (ctx.world > SYMM_MAX_RANKS)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0, "module5/flag-barrier runs with at most 8 ranks");
  cudaStream_t stream = NULL;
  world_maps m;
  memset(&m, 0, sizeof m);
  int grid = 0;
  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    /* Every rank's inbox and flags, mapped here; the flags start at 0 (mgpu_symm_alloc zeroes). */
    mgpu_symm_alloc(&ctx, "inbox", sizeof(float) * (size_t)kInboxFloats, &m.inbox);
    mgpu_symm_alloc(&ctx, "flags", sizeof(unsigned int) * SYMM_MAX_RANKS, &m.flags);

    /* The same co-resident grid on every rank: the smallest of everyone's. */
    int sms = 0, per_sm = 0;
    MGPU_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx.device));
    MGPU_LEARNER(per_sm = round_blocks_per_sm());
    if (per_sm < 1) mgpu_fail("learner", "exchange_tile", __FILE__, __LINE__, 0, "the kernel around exchange_tile cannot run 512 threads per block (too many registers?)");
    if (per_sm > 2) per_sm = 2;
    grid = sms * per_sm;
    for (int p = 0; p < ctx.world; p++) {
      int g = grid;
      mgpu_share(&ctx, "grid", &g, sizeof g, p);
      if (g < grid) grid = g;
    }
    mgpu_value("blocks per rank (every SM, all resident)", grid, "blocks");
    mgpu_barrier(&ctx, "mapped");
  }

  unsigned int epoch = 0;
  for (int k = 0; k < ctx.ncases; k++) run_case(&ctx, &m, &ctx.cases[k], &epoch, grid, stream);

  if (mgpu_computes(&ctx)) {
    mgpu_symm_free(&ctx, &m.inbox);
    mgpu_symm_free(&ctx, &m.flags);
    MGPU_CUDA(cudaStreamDestroy(stream));
  }
  return mgpu_finish(&ctx);
}
