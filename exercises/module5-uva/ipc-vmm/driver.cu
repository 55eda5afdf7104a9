/*
 * driver.cu: module5/ipc-vmm (course-owned).
 *
 * One process per GPU (launcher "local"), at least two ranks (two ranks on one GPU work too).
 * Each rank reads the buffer of the previous rank, prev = (rank + world - 1) mod world.
 *
 * Cases (n = floats): "ipc-..." share with CUDA IPC, "vmm-..." with the VMM API.
 *   ipc: the driver cudaMallocs `mine`, fills it with exact values of (seed, rank, iteration),
 *        calls ipc_export, hands every rank every handle (mgpu_share, one root per rank), calls
 *        ipc_import on prev's handle and add_peer(out, mine, peer); then the ranks meet before
 *        ipc_close and cudaFree, so nobody frees what another still reads.
 *   vmm: vmm_create gives a region and a file descriptor; the driver fills the region, passes
 *        the descriptors between the processes with the harness (mgpu_share_fds: SCM_RIGHTS
 *        over a Unix socket), closes its own, calls vmm_import on prev's, closes that one too
 *        (an imported handle keeps the memory alive), and calls add_peer.
 * out is a guarded, poisoned buffer; every element is compared with mine + prev's values,
 * exactly (integers, tolerance 0). A rank's values differ from every other rank's, so reading
 * the wrong buffer fails. If any rank's export gives nothing usable, every rank records the
 * case as failed and skips the exchange (the ranks agree first, so nobody waits forever).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "share.h"

static void expect_no_pending_error(const char *fn) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s left a CUDA error unchecked: %s (%s). Wrap every CUDA call in MGPU_CUDA(...) and every driver call in MGPU_CU(...).",
             fn, cudaGetErrorName(e), cudaGetErrorString(e));
    mgpu_fail("learner", fn, __FILE__, __LINE__, (long)e, msg);
  }
}

/* Every rank's flag; 1 when all are set. */
static int all_ok(mgpu_ctx *ctx, const char *key, int mine) {
  int ok = 1;
  for (int r = 0; r < ctx->world; r++) {
    int v = mine;
    mgpu_share(ctx, key, &v, sizeof v, r);
    ok = ok && v;
  }
  return ok;
}

static void failed_case(const char *name, long long n, const char *msg) {
  mgpu_result r;
  mgpu_result_init(&r, n);
  snprintf(r.msg, sizeof r.msg, "%s", msg);
  mgpu_record_case(name, &r, 1);
}

/* out == mine + prev's values, every element; writes the case record. */
static void check_sum(mgpu_ctx *ctx, const char *name, const mgpu_buf *out, long long n, int it, int prev,
                      const char *how) {
  float *want = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!want) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  const uint64_t km = mgpu_exact_key(ctx->seed, ctx->rank, it), kp = mgpu_exact_key(ctx->seed, prev, it);
  for (long long i = 0; i < n; i++) want[i] = mgpu_exact_value_k(km, i) + mgpu_exact_value_k(kp, i);
  float *got = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!got) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  MGPU_CUDA(cudaMemcpy(got, out->ptr, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost));
  mgpu_result r;
  mgpu_result_init(&r, n);
  long long own = 0, wrong = 0, poison = 0;
  for (long long i = 0; i < n; i++) {
    mgpu_result_add(&r, i, got[i], want[i], 0);
    if (got[i] == want[i]) continue;
    wrong++;
    uint32_t bits;
    memcpy(&bits, &got[i], sizeof bits);
    if (bits == 0xFFFFFFFFu)
      poison++;
    else if (got[i] == 2 * mgpu_exact_value_k(km, i))
      own++;
  }
  free(got);
  r.guard_hits = mgpu_guard_hits(out);
  if (wrong > 0 && own * 2 >= wrong)
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): %lld of %lld sums equal twice this rank's own value: the kernel read this rank's buffer, not the one rank %d shared",
             ctx->rank, how, own, n, prev);
  else if (wrong > 0 && poison == wrong)
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): %lld of %lld elements of out were never written by add_peer", ctx->rank, how, poison, n);
  else if (wrong > 0)
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): %lld of %lld sums differ from mine[i] + (rank %d's buffer)[i]", ctx->rank, how, wrong, n, prev);
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): add_peer wrote outside out[0..%lld)", ctx->rank, how, n);
  mgpu_record_case(name, &r, 0);
  free(want);
}

static void run_ipc(mgpu_ctx *ctx, const mgpu_case *c, int it, cudaStream_t stream) {
  const long long n = c->n;
  const int prev = (ctx->rank + ctx->world - 1) % ctx->world;
  float *mine = NULL;
  MGPU_CUDA(cudaMalloc((void **)&mine, sizeof(float) * (size_t)n));
  mgpu_fill_exact_f32(mine, n, ctx->seed, ctx->rank, it, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));

  cudaIpcMemHandle_t h, *all = (cudaIpcMemHandle_t *)calloc((size_t)ctx->world, sizeof h);
  if (!all) mgpu_fail("driver", "calloc", __FILE__, __LINE__, 0, "out of host memory");
  memset(&h, 0, sizeof h);
  ipc_export(mine, &h);
  expect_no_pending_error("ipc_export");
  cudaIpcMemHandle_t zero;
  memset(&zero, 0, sizeof zero);
  const int exported = memcmp(&h, &zero, sizeof h) != 0;
  if (!all_ok(ctx, "ipc-exported", exported)) {
    failed_case(c->name, n, exported ? "another rank's ipc_export left its handle empty: no buffer to read"
                                     : "ipc_export left the handle empty (all zero bytes): nothing can be mapped from it");
    MGPU_CUDA(cudaFree(mine));
    free(all);
    return;
  }
  for (int r = 0; r < ctx->world; r++) {
    if (r == ctx->rank) all[r] = h;
    mgpu_share(ctx, "ipc-handle", &all[r], sizeof all[r], r);
  }
  float *peer = (float *)ipc_import(&all[prev]);
  expect_no_pending_error("ipc_import");
  mgpu_buf out = mgpu_alloc(sizeof(float) * (size_t)n, ctx->device);
  if (peer) {
    add_peer((float *)out.ptr, mine, peer, n, stream);
    expect_no_pending_error("add_peer");
    MGPU_CUDA(cudaStreamSynchronize(stream));
    MGPU_CUDA(cudaDeviceSynchronize());
    check_sum(ctx, c->name, &out, n, it, prev, "CUDA IPC");
  } else {
    failed_case(c->name, n, "ipc_import returned NULL: the peer's buffer was not mapped");
  }
  mgpu_barrier(ctx, "ipc-read"); /* nobody closes or frees while another rank still reads */
  if (peer) {
    ipc_close(peer);
    expect_no_pending_error("ipc_close");
  }
  mgpu_barrier(ctx, "ipc-closed");
  mgpu_free(&out);
  MGPU_CUDA(cudaFree(mine));
  free(all);
}

static void run_vmm(mgpu_ctx *ctx, const mgpu_cu *cu, const mgpu_case *c, int it, cudaStream_t stream) {
  const long long n = c->n;
  const size_t bytes = sizeof(float) * (size_t)n;
  const int prev = (ctx->rank + ctx->world - 1) % ctx->world;
  vmm_region mine, peer;
  memset(&mine, 0, sizeof mine);
  memset(&peer, 0, sizeof peer);
  const int fd = vmm_create(cu, bytes, ctx->device, &mine);
  expect_no_pending_error("vmm_create");
  const int usable = fd >= 0 && fcntl(fd, F_GETFD) >= 0 && mine.ptr != 0 && mine.size >= bytes;
  if (!all_ok(ctx, "vmm-created", usable)) {
    char msg[300];
    if (usable)
      snprintf(msg, sizeof msg, "another rank's vmm_create returned no usable region and descriptor");
    else
      snprintf(msg, sizeof msg, "vmm_create returned descriptor %d, region at 0x%llx of %zu bytes (%zu asked): it must return an open file descriptor and a mapped region at least as large as asked",
               fd, (unsigned long long)mine.ptr, mine.size, bytes);
    failed_case(c->name, n, msg);
    if (fd >= 0) close(fd);
    return;
  }
  mgpu_fill_exact_f32((float *)(uintptr_t)mine.ptr, n, ctx->seed, ctx->rank, it, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));

  int *fds = (int *)calloc((size_t)ctx->world, sizeof(int));
  if (!fds) mgpu_fail("driver", "calloc", __FILE__, __LINE__, 0, "out of host memory");
  mgpu_share_fds(ctx, "vmm", &fd, 1, fds);
  close(fd);
  vmm_import(cu, fds[prev], bytes, ctx->device, &peer);
  expect_no_pending_error("vmm_import");
  for (int r = 0; r < ctx->world; r++) close(fds[r]);
  free(fds);

  mgpu_buf out = mgpu_alloc(bytes, ctx->device);
  if (peer.ptr) {
    add_peer((float *)out.ptr, (const float *)(uintptr_t)mine.ptr, (const float *)(uintptr_t)peer.ptr, n, stream);
    expect_no_pending_error("add_peer");
    MGPU_CUDA(cudaStreamSynchronize(stream));
    MGPU_CUDA(cudaDeviceSynchronize());
    check_sum(ctx, c->name, &out, n, it, prev, "VMM");
  } else {
    failed_case(c->name, n, "vmm_import left the region unmapped (ptr 0)");
  }
  mgpu_barrier(ctx, "vmm-read");
  if (peer.ptr) vmm_release(cu, &peer);
  expect_no_pending_error("vmm_release");
  mgpu_barrier(ctx, "vmm-unmapped");
  vmm_release(cu, &mine);
  expect_no_pending_error("vmm_release");
  mgpu_free(&out);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  if (ctx.world < 2)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0,
              "module5/ipc-vmm shares memory between processes: it needs at least 2 ranks (--ranks 2 runs two on one GPU)");
  const mgpu_cu *cu = mgpu_cu_api();
  cudaStream_t stream;
  MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int k = 0; k < ctx.ncases; k++) {
    const mgpu_case *c = &ctx.cases[k];
    if (strncmp(c->name, "ipc-", 4) == 0)
      run_ipc(&ctx, c, k + 1, stream);
    else if (strncmp(c->name, "vmm-", 4) == 0)
      run_vmm(&ctx, cu, c, k + 1, stream);
    else
      mgpu_fail("driver", "cases", __FILE__, __LINE__, 0, "case names start with ipc- or vmm-");
  }
  MGPU_CUDA(cudaStreamDestroy(stream));
  return mgpu_finish(&ctx);
}
