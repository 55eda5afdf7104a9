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
 * exactly (fine exact values, multiples of 1/64; tolerance 0). A rank's values differ from every other rank's, so reading
 * the wrong buffer fails. The rank also reports what the learner's mappings are: the access the
 * imported VMM region gives this rank's GPU (cuMemGetAccess: read/write, as share.h asks), and
 * whether anything is still mapped at a mapping's address after ipc_close or vmm_release
 * (cudaPointerGetAttributes); right sums with a mapping left behind, or a read-only import,
 * fail the case. If any rank's export gives nothing usable, every rank records the
 * case as failed and skips the exchange (the ranks agree first, so nobody waits forever).
 *
 * The comparisons are each rank's verifier's (`verifier: true`, docs/protocol.md §4): handles,
 * descriptors, mappings and rendezvous stay in the rank, which hands over what it found of the
 * learner's export (usable here, usable on every rank; for VMM the descriptor and region), whether
 * the import gave an address, and `out` with its guard count. The verifier makes mine + prev's
 * values on the CPU and records every case.
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

/* Whether `p` is still device memory mapped in this process (after the learner's release). */
static int still_mapped(const void *p) {
  cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* an address nothing is mapped at */
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* The access `device` has to the mapping at p (cuMemGetAccess, CU_MEM_ACCESS_FLAGS_PROT_*), or
 * -1 when the driver does not tell. */
typedef CUresult (*mem_get_access_fn)(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr);
static long long access_of(CUdeviceptr p, int device) {
  static mem_get_access_fn get = NULL;
  static int looked = 0;
  if (!looked) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAccess", &fn, 12050, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      get = (mem_get_access_fn)fn;
    (void)cudaGetLastError();
    looked = 1;
  }
  if (!get) return -1;
  CUmemLocation loc;
  memset(&loc, 0, sizeof loc);
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = device;
  unsigned long long flags = 0;
  if (get(&flags, &loc, p) != CUDA_SUCCESS) return -1;
  return (long long)flags;
}

/* Where the check is made: the case failed without a sum to compare. */
static void failed_case(mgpu_ctx *ctx, const char *name, long long n, const char *msg) {
  if (!mgpu_verifies(ctx)) return;
  mgpu_result r;
  mgpu_result_init(&r, n);
  snprintf(r.msg, sizeof r.msg, "%s", msg);
  mgpu_record_case(name, &r, 1);
}

/* The rank reads out back and counts its guard bytes and hands both over ("<name>/out",
 * "<name>/guards"); where the check is made, out == mine + prev's values, every element, and the
 * case record. Called on the same path in both programs (after the import gave an address). */
static void check_sum(mgpu_ctx *ctx, const char *name, const mgpu_buf *out, long long n, int it, int prev,
                      const char *how, const char *after) {
  const size_t bytes = sizeof(float) * (size_t)(n > 0 ? n : 1);
  float *got = (float *)malloc(bytes);
  if (!got) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  long long hits = 0;
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMemcpy(got, out->ptr, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost));
    hits = mgpu_guard_hits(out);
  }
  char tag[160];
  snprintf(tag, sizeof tag, "%s/out", name);
  mgpu_hand_over(ctx, tag, got, sizeof(float) * (size_t)n);
  snprintf(tag, sizeof tag, "%s/guards", name);
  if (!mgpu_hand_over(ctx, tag, &hits, sizeof hits)) {
    free(got);
    return;
  }
  float *want = (float *)malloc(bytes);
  if (!want) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  const uint64_t km = mgpu_exact_key(ctx->seed, ctx->rank, it), kp = mgpu_exact_key(ctx->seed, prev, it);
  for (long long i = 0; i < n; i++) want[i] = mgpu_fine_value_k(km, i) + mgpu_fine_value_k(kp, i);
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
    else if (got[i] == 2 * mgpu_fine_value_k(km, i))
      own++;
  }
  free(got);
  r.guard_hits = hits;
  if (wrong > 0 && own * 2 >= wrong)
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): %lld of %lld sums equal twice this rank's own value: the kernel read this rank's buffer, not the one rank %d shared",
             ctx->rank, how, own, n, prev);
  else if (wrong > 0 && poison == wrong)
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): %lld of %lld elements of out were never written by add_peer", ctx->rank, how, poison, n);
  else if (wrong > 0)
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): %lld of %lld sums differ from mine[i] + (rank %d's buffer)[i]", ctx->rank, how, wrong, n, prev);
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): add_peer wrote outside out[0..%lld)", ctx->rank, how, n);
  else if (after && after[0])
    snprintf(r.msg, sizeof r.msg, "rank %d (%s): the sums are right, but %s", ctx->rank, how, after);
  mgpu_record_case(name, &r, after && after[0]);
  free(want);
}

/* Whether the learner's import gave an address, as the rank found it (handed over). */
static int hand_over_imported(mgpu_ctx *ctx, const char *name, int imported) {
  char tag[160];
  snprintf(tag, sizeof tag, "%s/imported", name);
  mgpu_hand_over(ctx, tag, &imported, sizeof imported);
  return imported;
}

static void run_ipc(mgpu_ctx *ctx, const mgpu_case *c, int it, cudaStream_t stream) {
  const long long n = c->n;
  const int prev = (ctx->rank + ctx->world - 1) % ctx->world;
  float *mine = NULL;
  cudaIpcMemHandle_t *all = NULL;
  /* What the rank found of ipc_export: {this rank's handle is non-empty, every rank's is}. */
  int exported[2] = {0, 0};
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMalloc((void **)&mine, sizeof(float) * (size_t)n));
    mgpu_fill_fine_f32(mine, n, ctx->seed, ctx->rank, it, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));

    cudaIpcMemHandle_t h;
    all = (cudaIpcMemHandle_t *)calloc((size_t)ctx->world, sizeof h);
    if (!all) mgpu_fail("driver", "calloc", __FILE__, __LINE__, 0, "out of host memory");
    memset(&h, 0, sizeof h);
    MGPU_LEARNER(ipc_export(mine, &h));
    expect_no_pending_error("ipc_export");
    cudaIpcMemHandle_t zero;
    memset(&zero, 0, sizeof zero);
    exported[0] = memcmp(&h, &zero, sizeof h) != 0;
    exported[1] = all_ok(ctx, "ipc-exported", exported[0]);
    if (exported[1]) {
      for (int r = 0; r < ctx->world; r++) {
        if (r == ctx->rank) all[r] = h;
        mgpu_share(ctx, "ipc-handle", &all[r], sizeof all[r], r);
      }
    }
  }
  char tag[160];
  snprintf(tag, sizeof tag, "%s/exported", c->name);
  mgpu_hand_over(ctx, tag, exported, sizeof exported);
  if (!exported[1]) {
    failed_case(ctx, c->name, n, exported[0] ? "another rank's ipc_export left its handle empty: no buffer to read"
                                             : "ipc_export left the handle empty (all zero bytes): nothing can be mapped from it");
    if (mgpu_computes(ctx)) MGPU_CUDA(cudaFree(mine));
    free(all);
    return;
  }

  float *peer = NULL;
  mgpu_buf out;
  memset(&out, 0, sizeof out);
  if (mgpu_computes(ctx)) {
    MGPU_LEARNER(peer = (float *)ipc_import(&all[prev]));
    expect_no_pending_error("ipc_import");
    out = mgpu_alloc(sizeof(float) * (size_t)n, ctx->device);
    if (peer) {
      MGPU_LEARNER(add_peer((float *)out.ptr, mine, peer, n, stream));
      expect_no_pending_error("add_peer");
      MGPU_CUDA(cudaStreamSynchronize(stream));
      MGPU_CUDA(cudaDeviceSynchronize());
    }
  }
  /* What the rank found after ipc_close: {the peer's buffer is still mapped at its address}. */
  int left[1] = {0};
  if (mgpu_computes(ctx)) {
    mgpu_barrier(ctx, "ipc-read"); /* nobody closes or frees while another rank still reads */
    if (peer) {
      MGPU_LEARNER(ipc_close(peer));
      expect_no_pending_error("ipc_close");
      left[0] = still_mapped(peer);
    }
    mgpu_barrier(ctx, "ipc-closed");
  }
  if (hand_over_imported(ctx, c->name, peer != NULL)) {
    snprintf(tag, sizeof tag, "%s/closed", c->name);
    mgpu_hand_over(ctx, tag, left, sizeof left);
    check_sum(ctx, c->name, &out, n, it, prev, "CUDA IPC",
              left[0] ? "ipc_close left the peer's buffer mapped at the address ipc_import returned: "
                        "unmap it (cudaIpcCloseMemHandle)"
                      : "");
  } else {
    failed_case(ctx, c->name, n, "ipc_import returned NULL: the peer's buffer was not mapped");
  }
  if (mgpu_computes(ctx)) {
    mgpu_free(&out);
    MGPU_CUDA(cudaFree(mine));
  }
  free(all);
}

static void run_vmm(mgpu_ctx *ctx, const mgpu_cu *cu, const mgpu_case *c, int it, cudaStream_t stream) {
  const long long n = c->n;
  const size_t bytes = sizeof(float) * (size_t)n;
  const int prev = (ctx->rank + ctx->world - 1) % ctx->world;
  vmm_region mine, peer;
  memset(&mine, 0, sizeof mine);
  memset(&peer, 0, sizeof peer);
  (void)cu;
  /* What the rank found of vmm_create: {usable here, usable on every rank, the descriptor, the
   * region's address and size}. */
  long long created[5] = {0, 0, -1, 0, 0};
  int fd = -1;
  if (mgpu_computes(ctx)) {
    MGPU_LEARNER(fd = vmm_create(cu, bytes, ctx->device, &mine));
    expect_no_pending_error("vmm_create");
    created[0] = fd >= 0 && fcntl(fd, F_GETFD) >= 0 && mine.ptr != 0 && mine.size >= bytes;
    created[1] = all_ok(ctx, "vmm-created", (int)created[0]);
    created[2] = fd;
    created[3] = (long long)mine.ptr;
    created[4] = (long long)mine.size;
  }
  char tag[160];
  snprintf(tag, sizeof tag, "%s/created", c->name);
  mgpu_hand_over(ctx, tag, created, sizeof created);
  if (!created[1]) {
    char msg[300];
    if (created[0])
      snprintf(msg, sizeof msg, "another rank's vmm_create returned no usable region and descriptor");
    else
      snprintf(msg, sizeof msg, "vmm_create returned descriptor %d, region at 0x%llx of %zu bytes (%zu asked): it must return an open file descriptor and a mapped region at least as large as asked",
               (int)created[2], (unsigned long long)created[3], (size_t)created[4], bytes);
    failed_case(ctx, c->name, n, msg);
    if (fd >= 0) close(fd);
    return;
  }

  mgpu_buf out;
  memset(&out, 0, sizeof out);
  int imported = 0; /* vmm_import gave an address (vmm_release may clear peer later) */
  if (mgpu_computes(ctx)) {
    mgpu_fill_fine_f32((float *)(uintptr_t)mine.ptr, n, ctx->seed, ctx->rank, it, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));

    int *fds = (int *)calloc((size_t)ctx->world, sizeof(int));
    if (!fds) mgpu_fail("driver", "calloc", __FILE__, __LINE__, 0, "out of host memory");
    mgpu_share_fds(ctx, "vmm", &fd, 1, fds);
    close(fd);
    MGPU_LEARNER(vmm_import(cu, fds[prev], bytes, ctx->device, &peer));
    expect_no_pending_error("vmm_import");
    for (int r = 0; r < ctx->world; r++) close(fds[r]);
    free(fds);

    out = mgpu_alloc(bytes, ctx->device);
    imported = peer.ptr != 0;
    if (peer.ptr) {
      MGPU_LEARNER(add_peer((float *)out.ptr, (const float *)(uintptr_t)mine.ptr, (const float *)(uintptr_t)peer.ptr, n, stream));
      expect_no_pending_error("add_peer");
      MGPU_CUDA(cudaStreamSynchronize(stream));
      MGPU_CUDA(cudaDeviceSynchronize());
    }
  }
  /* What the rank found of the mappings: {the access this rank's GPU has to the imported one
   * (-1 before it is asked; not known is the driver's failure), the imported region still mapped after vmm_release, this rank's own region
   * still mapped after vmm_release}. */
  long long found[3] = {-1, 0, 0};
  if (mgpu_computes(ctx)) {
    const CUdeviceptr peer_at = peer.ptr, mine_at = mine.ptr;
    if (peer_at) {
      found[0] = access_of(peer_at, ctx->device);
      /* Never a silent pass: without the answer a read-only import would go unseen. */
      if (found[0] < 0)
        mgpu_fail("driver", "cuMemGetAccess", __FILE__, __LINE__, 0,
                  "the CUDA driver did not tell the access this GPU has to the imported region "
                  "(cuMemGetAccess through cudaGetDriverEntryPointByVersion), so a read-only import "
                  "could not be told from a read/write one");
    }
    mgpu_barrier(ctx, "vmm-read");
    if (peer_at) MGPU_LEARNER(vmm_release(cu, &peer));
    expect_no_pending_error("vmm_release");
    if (peer_at) found[1] = still_mapped((const void *)(uintptr_t)peer_at);
    mgpu_barrier(ctx, "vmm-unmapped");
    MGPU_LEARNER(vmm_release(cu, &mine));
    expect_no_pending_error("vmm_release");
    found[2] = still_mapped((const void *)(uintptr_t)mine_at);
  }
  if (hand_over_imported(ctx, c->name, imported)) {
    snprintf(tag, sizeof tag, "%s/mappings", c->name);
    mgpu_hand_over(ctx, tag, found, sizeof found);
    char after[300] = "";
    if (found[0] >= 0 && found[0] != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      snprintf(after, sizeof after, "vmm_import gave this rank's GPU %s access to the imported region, not read/write: "
               "CUmemAccessDesc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE (the next exercises write into a peer's memory)",
               found[0] == CU_MEM_ACCESS_FLAGS_PROT_READ ? "read-only" : "no");
    else if (found[1])
      snprintf(after, sizeof after, "vmm_release left the imported region mapped: MemUnmap, MemAddressFree, then MemRelease");
    else if (found[2])
      snprintf(after, sizeof after, "vmm_release left this rank's own region mapped: MemUnmap, MemAddressFree, then MemRelease");
    check_sum(ctx, c->name, &out, n, it, prev, "VMM", after);
  } else {
    failed_case(ctx, c->name, n, "vmm_import left the region unmapped (ptr 0)");
  }
  if (mgpu_computes(ctx)) mgpu_free(&out);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  if (ctx.world < 2)
    mgpu_fail("driver", "mgpu_init", __FILE__, __LINE__, 0,
              "module5/ipc-vmm shares memory between processes: it needs at least 2 ranks (--ranks 2 runs two on one GPU)");
  const mgpu_cu *cu = NULL;
  cudaStream_t stream = NULL;
  if (mgpu_computes(&ctx)) {
    cu = mgpu_cu_api();
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  for (int k = 0; k < ctx.ncases; k++) {
    const mgpu_case *c = &ctx.cases[k];
    if (strncmp(c->name, "ipc-", 4) == 0)
      run_ipc(&ctx, c, k + 1, stream);
    else if (strncmp(c->name, "vmm-", 4) == 0)
      run_vmm(&ctx, cu, c, k + 1, stream);
    else
      mgpu_fail("driver", "cases", __FILE__, __LINE__, 0, "case names start with ipc- or vmm-");
  }
  if (mgpu_computes(&ctx)) MGPU_CUDA(cudaStreamDestroy(stream));
  return mgpu_finish(&ctx);
}
