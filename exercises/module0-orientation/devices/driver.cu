/*
 * module0/devices driver: asks the learner's code how many GPUs there are and which pairs can
 * reach each other's memory, and compares with the runtime's own answers.
 *
 * Cases (MGPU_CASES): "count" (n unused), and any number of matrix cases whose n is the number
 * of devices to ask about (capped at the number visible), e.g. matrix=64, matrix-2=2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"

enum {
  kUnwritten = -7, /* every entry holds this before the learner's call */
  kGuard = 64,     /* entries after the n*n matrix that must keep kUnwritten */
};

/* A CUDA error the learner's code caused but did not check is the learner's, not the driver's:
 * name it before a driver call trips over it. */
static void expect_no_pending_error(const char *fn) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char msg[300];
    snprintf(msg, sizeof msg,
             "%s left a CUDA error unchecked: %s (%s). Wrap every CUDA call in MGPU_CUDA(...).", fn,
             cudaGetErrorName(e), cudaGetErrorString(e));
    mgpu_fail("learner", fn, __FILE__, __LINE__, (long)e, msg);
  }
}

/* Records one compared integer: unwritten entries are told apart from wrong ones. */
static void add_entry(mgpu_result *r, long long i, int got, int want) {
  r->checked++;
  if (got == want) return;
  if (got == kUnwritten)
    r->unwritten++;
  else
    r->bad++;
  if (r->nfirst < 8) {
    mgpu_mismatch *m = &r->first[r->nfirst++];
    m->i = i;
    if (got == kUnwritten)
      snprintf(m->got, sizeof m->got, "unwritten");
    else
      snprintf(m->got, sizeof m->got, "%d", got);
    snprintf(m->want, sizeof m->want, "%d", want);
  }
}

static void check_count(const char *name) {
  int want = 0;
  MGPU_CUDA(cudaGetDeviceCount(&want));
  int got = gpu_count();
  expect_no_pending_error("gpu_count");
  mgpu_result r;
  mgpu_result_init(&r, 1);
  add_entry(&r, 0, got, want);
  if (got != want)
    snprintf(r.msg, sizeof r.msg,
             "gpu_count() returned %d but this process sees %d device(s): ask the CUDA runtime "
             "(cudaGetDeviceCount).",
             got, want);
  mgpu_record_case(name, &r, 0);
}

static void check_matrix(const char *name, long long n_case) {
  int count = 0;
  MGPU_CUDA(cudaGetDeviceCount(&count));
  int n = n_case < count ? (int)n_case : count;
  size_t entries = (size_t)n * n;
  int *m = (int *)malloc((entries + kGuard) * sizeof(int));
  if (!m) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  for (size_t k = 0; k < entries + kGuard; k++) m[k] = kUnwritten;

  peer_access_matrix(n, m);
  expect_no_pending_error("peer_access_matrix");

  mgpu_result r;
  mgpu_result_init(&r, n); /* n: the number of devices asked about */
  int diag_wrong = 0, off_wrong = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      int want = 1;
      if (i != j) {
        MGPU_CUDA(cudaDeviceCanAccessPeer(&want, i, j));
        want = want ? 1 : 0;
      }
      int got = m[(size_t)i * n + j];
      add_entry(&r, (long long)i * n + j, got, want);
      if (got != want && got != kUnwritten) (i == j ? diag_wrong : off_wrong)++;
    }
  for (int k = 0; k < kGuard; k++)
    if (m[entries + k] != kUnwritten) r.guard_hits++;

  if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg,
             "%lld entries after the %d x %d matrix were written: the row stride is n=%d (the "
             "argument), not the number of devices on the machine.",
             r.guard_hits, n, n, n);
  else if (r.unwritten == (long long)entries)
    snprintf(r.msg, sizeof r.msg, "no entry of the %d x %d matrix was written.", n, n);
  else if (diag_wrong)
    snprintf(r.msg, sizeof r.msg,
             "the diagonal must be 1: a device always reaches its own memory. "
             "cudaDeviceCanAccessPeer is a question about two different devices.");
  else if (off_wrong)
    snprintf(r.msg, sizeof r.msg,
             "entry [i*n+j] must say whether device i can access device j "
             "(cudaDeviceCanAccessPeer(&ok, i, j)).");
  mgpu_record_case(name, &r, 0);
  free(m);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  for (int c = 0; c < ctx.ncases; c++) {
    const mgpu_case *k = &ctx.cases[c];
    if (strcmp(k->name, "count") == 0)
      check_count(k->name);
    else
      check_matrix(k->name, k->n);
  }
  return mgpu_finish(&ctx);
}
