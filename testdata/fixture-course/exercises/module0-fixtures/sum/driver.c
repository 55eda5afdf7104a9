/* driver.c — the course-owned driver of module0/sum (a CPU fixture).
 *
 * For each case of MGPU_CASES it calls vec_sum twice, with inputs that depend on the seed, the
 * rank and the iteration, into an output that is poisoned (0xFF bytes, a NaN) before each call
 * and surrounded by guard bytes. The manifest says `verifier: true`: the output goes to this
 * rank's verifier process, which alone knows the seed, makes the expected sums and compares
 * every element exactly (docs/protocol.md §4, "The verifier"). Run by hand, without the
 * checker, the program does both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgpu.h"
#include "sum.h"

#define GUARD 256
#define GUARD_BYTE 0xA5

/* A host buffer of n floats with GUARD bytes on each side. */
typedef struct {
  unsigned char *base;
  float *ptr;
  size_t bytes;
} gbuf;

static gbuf gbuf_alloc(long long n) {
  gbuf b;
  b.bytes = (size_t)n * sizeof(float);
  b.base = malloc(b.bytes + 2 * GUARD);
  if (!b.base) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of memory");
  b.ptr = (float *)(b.base + GUARD);
  return b;
}

/* Re-arms the guards and poisons the usable part. */
static void gbuf_poison(gbuf *b) {
  memset(b->base, GUARD_BYTE, GUARD);
  memset(b->base + GUARD + b->bytes, GUARD_BYTE, GUARD);
  memset(b->ptr, 0xFF, b->bytes);
}

/* Guard bytes that changed since the last poison. */
static long long gbuf_guard_hits(const gbuf *b) {
  long long hits = 0;
  size_t i;
  for (i = 0; i < GUARD; i++) {
    hits += b->base[i] != GUARD_BYTE;
    hits += b->base[GUARD + b->bytes + i] != GUARD_BYTE;
  }
  return hits;
}

void lib_sum(const float *a, const float *b, float *out, long n) {
  long i;
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* This rank's inputs of iteration iter: a from the iteration's key, b from another one. */
static void inputs(const mgpu_ctx *ctx, int iter, float *a, float *b, long long n) {
  long long i;
  for (i = 0; i < n; i++) {
    a[i] = mgpu_exact_value(ctx->seed, ctx->rank, iter, i);
    b[i] = mgpu_exact_value(ctx->seed, ctx->rank, 1000 + iter, i);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  int c, iter;
  mgpu_init(&ctx, argc, argv);
  for (c = 0; c < ctx.ncases; c++) {
    long long n = ctx.cases[c].n, i;
    float *a = malloc((size_t)n * sizeof(float));
    float *b = malloc((size_t)n * sizeof(float));
    gbuf out = gbuf_alloc(n);
    mgpu_result r;
    if (!a || !b) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of memory");
    mgpu_result_init(&r, n);
    for (iter = 0; iter < 2; iter++) {
      long long wrong_before = r.bad + r.unwritten, hits = 0;
      char tag[96];
      if (mgpu_computes(&ctx)) {
        inputs(&ctx, iter, a, b, n);
        gbuf_poison(&out);
        MGPU_LEARNER(vec_sum(a, b, out.ptr, (long)n));
        hits = gbuf_guard_hits(&out);
      }
      /* The output and the guard count go to the verifier, which checks them. */
      snprintf(tag, sizeof tag, "%s/%d/out", ctx.cases[c].name, iter);
      mgpu_hand_over(&ctx, tag, out.ptr, out.bytes);
      snprintf(tag, sizeof tag, "%s/%d/guards", ctx.cases[c].name, iter);
      if (!mgpu_hand_over(&ctx, tag, &hits, sizeof hits)) continue;
      inputs(&ctx, iter, a, b, n);
      for (i = 0; i < n; i++) mgpu_result_add(&r, i, out.ptr[i], a[i] + b[i], 0.0);
      r.guard_hits += hits;
      if (iter == 1 && wrong_before == 0 && r.bad + r.unwritten > 0)
        snprintf(r.msg, sizeof r.msg,
                 "right in iteration 0, wrong in iteration 1: the inputs changed between the two "
                 "calls but the output did not follow (a result kept from the first call?)");
      if (hits > 0 && !r.msg[0])
        snprintf(r.msg, sizeof r.msg,
                 "%lld guard byte(s) around out changed: something wrote outside out[0..%lld)",
                 hits, n);
    }
    if (mgpu_verifies(&ctx)) mgpu_record_case(ctx.cases[c].name, &r, 0);
    free(a);
    free(b);
    free(out.base);
  }
  return mgpu_finish(&ctx);
}
