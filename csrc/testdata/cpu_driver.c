/* cpu_driver.c — a CPU-only driver for harness_test.go. The first argument picks a mode. */
#include "mgpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(int ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

static void mark(const mgpu_ctx *c, int k) {
  char p[4200];
  FILE *f;
  snprintf(p, sizeof p, "%s/mark-%d-%d", c->rdzv_dir, k, c->rank);
  f = fopen(p, "w");
  if (f) fclose(f);
}

static int all_marked(const mgpu_ctx *c, int k) {
  int r;
  for (r = 0; r < c->world; r++) {
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/mark-%d-%d", c->rdzv_dir, k, r);
    if (stat(p, &st) != 0) return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  const char *mode = argc > 1 ? argv[1] : "normal";
  int k;
  mgpu_init_nodevice(&ctx, argc, argv);

  if (strcmp(mode, "fail") == 0) {
    mgpu_note("about to fail");
    mgpu_fail(mgpu_where_for(__FILE__), "learner_function(x)", __FILE__, 42, 7,
              "it went \"wrong\"");
  }
  if (strcmp(mode, "split") == 0) {
    /* A rank whose outputs a verifier checks (split_test.go): its own input, one hand-over,
     * then another rank's inputs, which it must not be able to make. */
    double v = 42.0;
    mgpu_note("seed=%llu own=%g computes=%d verifies=%d", (unsigned long long)ctx.seed,
              (double)mgpu_exact_value(ctx.seed, ctx.rank, 3, 5), mgpu_computes(&ctx),
              mgpu_verifies(&ctx));
    mgpu_note("handed=%d", mgpu_hand_over(&ctx, "t/0", &v, sizeof v));
    mgpu_note("ownpat=%u",
              (unsigned)mgpu_pattern_byte_k(mgpu_rank_pattern_key(ctx.seed, ctx.rank, 3), 5));
    if (argc > 2 && strcmp(argv[2], "pattern") == 0)
      mgpu_note("otherpat=%u", (unsigned)mgpu_pattern_byte_k(
                                   mgpu_rank_pattern_key(ctx.seed, ctx.rank + 1, 3), 5));
    mgpu_note("other=%g", (double)mgpu_exact_value(ctx.seed, ctx.rank + 1, 3, 5));
    return mgpu_finish(&ctx);
  }
  if (strcmp(mode, "dumpable") == 0) {
    /* Whether this process may be traced by the user's other processes (split_test.go: a
     * verifier may not). */
    mgpu_note("dumpable=%d", prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
    return mgpu_finish(&ctx);
  }
  if (strcmp(mode, "barrier-only") == 0) {
    mgpu_barrier(&ctx, "lonely");
    return mgpu_finish(&ctx);
  }

  /* the context as the driver sees it */
  mgpu_note("ctx rank=%d world=%d local=%d/%d seed=%llu perf=%d min=%d max=%d budget=%g",
            ctx.rank, ctx.world, ctx.local_rank, ctx.local_world,
            (unsigned long long)ctx.seed, ctx.perf, ctx.min_reps, ctx.max_reps,
            ctx.perf_budget_ms);
  for (k = 0; k < ctx.ncases; k++) mgpu_note("case %s=%lld", ctx.cases[k].name, ctx.cases[k].n);
  mgpu_note("case_n small=%lld missing=%lld", mgpu_case_n(&ctx, "small", -1),
            mgpu_case_n(&ctx, "missing", -1));
  mgpu_note("odd \"quoted\" back\\slash\nnewline\ttab \x01 bell\x07 bad\xff utf8 \xc3\xa9 end");
  mgpu_value("pi", 3.141592653589793, "rad");
  mgpu_value("inf", INFINITY, "x");

  /* exact values, for the Go side to recompute */
  for (k = 0; k < 4; k++)
    mgpu_note("exact %d %d %d %.1f", ctx.rank, 2, k, mgpu_exact_value(ctx.seed, ctx.rank, 2, k));
  for (k = 0; k < 4; k++)
    mgpu_note("fine %d %d %d %.9g", ctx.rank, 2, k, mgpu_fine_value(ctx.seed, ctx.rank, 2, k));
  for (k = 0; k < 10; k++) mgpu_note("pattern 5 %d %u", k, mgpu_pattern_byte(ctx.seed, 5, k));
  {
    /* the host fill agrees with mgpu_pattern_byte_k from any first byte */
    uint8_t buf[37];
    uint64_t key = mgpu_pattern_key(ctx.seed, 5);
    int first, j;
    for (first = 0; first < 11; first++) {
      mgpu_pattern_fill_host(buf, sizeof buf, key, first);
      for (j = 0; j < (int)sizeof buf; j++)
        if (buf[j] != mgpu_pattern_byte_k(key, first + j))
          mgpu_fail("harness", "mgpu_pattern_fill_host", __FILE__, __LINE__, j, "differs");
    }
    mgpu_note("pattern fill ok");
  }
  for (k = 0; k < 10; k++)
    mgpu_note("rpattern 5 %d %u", k,
              (unsigned)mgpu_pattern_byte_k(mgpu_rank_pattern_key(ctx.seed, ctx.rank, 5), k));

  /* barriers: nobody passes barrier k before everybody has marked k */
  for (k = 0; k < 3; k++) {
    nap_ms(10 * ((ctx.rank + k) % ctx.world));
    mark(&ctx, k);
    mgpu_barrier(&ctx, "same-tag");
    if (!all_marked(&ctx, k)) mgpu_fail("harness", "barrier", __FILE__, __LINE__, k, "passed early");
  }
  mgpu_note("barriers ok");

  /* shares: root 1 (or 0) hands out a string, twice under the same key */
  for (k = 0; k < 2; k++) {
    char buf[64];
    char want[64];
    int root = ctx.world > 1 ? 1 : 0;
    snprintf(want, sizeof want, "from root %d round %d", root, k);
    memset(buf, 0, sizeof buf);
    if (ctx.rank == root) memcpy(buf, want, sizeof buf);
    mgpu_share(&ctx, "greeting", buf, sizeof buf, root);
    if (strcmp(buf, want) != 0) mgpu_fail("harness", "share", __FILE__, __LINE__, k, buf);
  }
  mgpu_note("shares ok");

  /* a passing case and a failing one */
  {
    mgpu_result r;
    float poison;
    unsigned u = 0xFFFFFFFFu;
    memcpy(&poison, &u, sizeof poison);
    mgpu_result_init(&r, 4);
    for (k = 0; k < 4; k++) mgpu_result_add(&r, k, k * 2.0, k * 2.0, 0);
    mgpu_record_case("good", &r, 0);

    mgpu_result_init(&r, 12);
    for (k = 0; k < 12; k++) {
      double want = k + 1.0;
      double got = k < 2 ? want : k < 4 ? want + 0.5 : k < 6 ? (double)poison : k == 6 ? NAN : want * 3;
      mgpu_result_add(&r, k, got, want, 0.25);
    }
    r.guard_hits = 0;
    snprintf(r.msg, sizeof r.msg, "the \"msg\" survives");
    mgpu_record_case("bad", &r, 0);
  }
  {
    double us[3] = {10.5, 11, 9.75}, wall[3] = {11, 12, NAN};
    mgpu_record_timing("t", "yours", 1 << 20, 1.5, "busbw", us, wall, 3);
  }
  return mgpu_finish(&ctx);
}
