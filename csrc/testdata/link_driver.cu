// link_driver.cu — a tiny CUDA + NCCL driver: harness_test.go compiles and links it (no GPU
// needed to link). It references every public entry point so a missing one fails the link.
#include <string.h>

#include <nccl.h>

#include "mgpu.h"

static void op(void *arg, int iter, cudaStream_t s) {
  mgpu_buf *b = (mgpu_buf *)arg;
  mgpu_fill_exact_f32((float *)b->ptr, (long long)(b->bytes / 4), 1, 0, iter, s);
  MGPU_KERNEL();
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  mgpu_init(&ctx, argc, argv);
  mgpu_buf b = mgpu_alloc(1 << 20, ctx.device);
  mgpu_poison(&b, 0);
  mgpu_delay(0, 1000);
  mgpu_fill_pattern(b.ptr, b.bytes, ctx.seed, 0, 0);
  mgpu_result r;
  mgpu_check_pattern("p", &b, ctx.seed, 0, &r);
  float want[4] = {0, 0, 0, 0};
  mgpu_check_f32("f", &b, want, 4, 0, &r);
  mgpu_check_f32_dev("fd", &b, (const float *)b.ptr, 4, 0, &r);
  (void)mgpu_guard_hits(&b);
  mgpu_timing t = {"t", 1 << 20, 1, "busbw", 0, 0};
  mgpu_time_pair(&ctx, &t, op, &b, op, &b, 0);
  (void)mgpu_time_one(&ctx, &t, "baseline", op, &b, 0);
  ncclUniqueId id;
  mgpu_nccl_unique_id(&ctx, &id);
  MGPU_NCCL(ncclSuccess);
  MGPU_CUDA(cudaDeviceSynchronize());
  int fd = 0, fds[1];
  mgpu_share_fds(&ctx, "fds", &fd, 1, fds);
  const mgpu_cu *cu = mgpu_cu_api();
  size_t gran = 0;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  MGPU_CU(cu->MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  mgpu_smlimit *lim = mgpu_sm_limit_create(ctx.device, 8);
  mgpu_sm_limit_enter(lim, 0);
  op(&b, 0, mgpu_sm_limit_stream(lim));
  mgpu_sm_limit_leave(lim, 0, "op");
  (void)mgpu_sm_limit_sms(lim);
  mgpu_sm_limit_destroy(lim);
  mgpu_free(&b);
  return mgpu_finish(&ctx);
}
