/*
 * driver.cu — module3/single-process (course-owned).
 *
 * One process, every visible GPU (launcher "single", mgpu_init_nodevice: the driver picks
 * devices itself). The learner's init_all creates one communicator per GPU; the driver checks
 * that comms[i] is rank i of ndev on device i. For every case it fills each device's send
 * buffer with that device's exact inputs, poisons every recv buffer, calls allreduce_all, reads
 * each recv back on that device's stream and compares every element with the host sum,
 * tolerance 0. Two iterations with different inputs per case.
 *
 * The lesson of the exercise is the deadlock: NCCL calls for several communicators issued one
 * after another from one thread, outside ncclGroupStart/ncclGroupEnd, wait for each other
 * forever. The driver cannot catch that; the runner's timeout does, and reports the hang.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "single-process.h"

enum { kIterations = 2 };

static void host_sum(float *want, uint64_t seed, int ndev, int iter, long long n) {
  long long i;
  int d;
  for (i = 0; i < n; i++) want[i] = 0.0f;
  for (d = 0; d < ndev; d++) {
    uint64_t key = mgpu_exact_key(seed, d, iter);
    for (i = 0; i < n; i++) want[i] += mgpu_fine_value_k(key, i);
  }
}

/* 1 when comms[i] is rank i of ndev on device i for every i; else the reason in msg. */
static int comms_match(int ndev, ncclComm_t *comms, char *msg, size_t len) {
  int i;
  for (i = 0; i < ndev; i++) {
    int count = -1, rank = -1, dev = -1;
    if (comms[i] == NULL) {
      snprintf(msg, len, "init_all left comms[%d] NULL: every GPU needs its communicator", i);
      return 0;
    }
    MGPU_NCCL(ncclCommCount(comms[i], &count));
    MGPU_NCCL(ncclCommUserRank(comms[i], &rank));
    MGPU_NCCL(ncclCommCuDevice(comms[i], &dev));
    if (count != ndev || rank != i || dev != i) {
      snprintf(msg, len,
               "comms[%d] is rank %d of %d on GPU %d; it must be rank %d of %d on GPU %d", i,
               rank, count, dev, i, ndev, i);
      return 0;
    }
  }
  return 1;
}

static void run_case(const mgpu_ctx *ctx, const mgpu_case *c, int ndev, ncclComm_t *comms,
                     cudaStream_t *streams) {
  const long long n = c->n;
  const size_t bytes = (size_t)n * sizeof(float);
  mgpu_buf *send = (mgpu_buf *)calloc((size_t)ndev, sizeof(mgpu_buf));
  mgpu_buf *recv = (mgpu_buf *)calloc((size_t)ndev, sizeof(mgpu_buf));
  float **sendp = (float **)calloc((size_t)ndev, sizeof(float *));
  float **recvp = (float **)calloc((size_t)ndev, sizeof(float *));
  float *want = (float *)malloc(bytes);
  float *host = NULL;
  mgpu_result r;
  int d, iter;

  if (!send || !recv || !sendp || !recvp || !want)
    mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  MGPU_CUDA(cudaMallocHost((void **)&host, bytes));
  mgpu_result_init(&r, n * ndev);
  for (d = 0; d < ndev; d++) {
    send[d] = mgpu_alloc(bytes, d);
    recv[d] = mgpu_alloc(bytes, d);
    sendp[d] = (float *)send[d].ptr;
    recvp[d] = (float *)recv[d].ptr;
  }

  for (iter = 0; iter < kIterations; iter++) {
    for (d = 0; d < ndev; d++) {
      MGPU_CUDA(cudaSetDevice(d));
      mgpu_poison(&recv[d], streams[d]);
      mgpu_fill_fine_f32(sendp[d], n, ctx->seed, d, iter, streams[d]);
    }
    allreduce_all(ndev, comms, sendp, recvp, (size_t)n, streams);
    host_sum(want, ctx->seed, ndev, iter, n);
    for (d = 0; d < ndev; d++) {
      long long i;
      MGPU_CUDA(cudaSetDevice(d));
      MGPU_CUDA(cudaMemcpyAsync(host, recvp[d], bytes, cudaMemcpyDeviceToHost, streams[d]));
      MGPU_CUDA(cudaStreamSynchronize(streams[d]));
      for (i = 0; i < n; i++) mgpu_result_add(&r, (long long)d * n + i, host[i], want[i], 0.0);
    }
  }
  for (d = 0; d < ndev; d++) r.guard_hits += mgpu_guard_hits(&send[d]) + mgpu_guard_hits(&recv[d]);
  if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "all-reduce of %lld floats over %d GPUs, %d iterations: recv on every GPU must hold "
             "the sum of every GPU's send (element index = GPU x %lld + i)",
             n, ndev, kIterations, n);
  mgpu_record_case(c->name, &r, 0);

  for (d = 0; d < ndev; d++) {
    mgpu_free(&send[d]);
    mgpu_free(&recv[d]);
  }
  MGPU_CUDA(cudaFreeHost(host));
  free(want);
  free(recvp);
  free(sendp);
  free(recv);
  free(send);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  int ndev, d, k, usable;
  ncclComm_t *comms;
  cudaStream_t *streams;
  char problem[sizeof(((mgpu_result *)0)->msg)];

  mgpu_init_nodevice(&ctx, argc, argv);
  ndev = ctx.num_devices;
  if (ndev < 1) mgpu_fail("driver", "cudaGetDeviceCount", __FILE__, __LINE__, 0, "no GPU visible");
  mgpu_note("one process driving %d GPUs", ndev);

  comms = (ncclComm_t *)calloc((unsigned)ndev, sizeof(ncclComm_t));
  streams = (cudaStream_t *)calloc((unsigned)ndev, sizeof(cudaStream_t));
  if (!comms || !streams) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  for (d = 0; d < ndev; d++) {
    MGPU_CUDA(cudaSetDevice(d));
    MGPU_CUDA(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
  }
  MGPU_CUDA(cudaSetDevice(0));

  init_all(ndev, comms);
  usable = comms_match(ndev, comms, problem, sizeof problem);
  if (!usable) mgpu_note("%s", problem);

  for (k = 0; k < ctx.ncases; k++) {
    if (!usable) {
      mgpu_result r;
      mgpu_result_init(&r, ctx.cases[k].n * ndev);
      snprintf(r.msg, sizeof r.msg, "%s", problem);
      mgpu_record_case(ctx.cases[k].name, &r, 1);
      continue;
    }
    run_case(&ctx, &ctx.cases[k], ndev, comms, streams);
  }

  for (d = 0; d < ndev; d++)
    if (comms[d] != NULL) MGPU_NCCL(ncclCommDestroy(comms[d]));
  for (d = 0; d < ndev; d++) {
    MGPU_CUDA(cudaSetDevice(d));
    MGPU_CUDA(cudaStreamDestroy(streams[d]));
  }
  free(streams);
  free(comms);
  return mgpu_finish(&ctx);
}
