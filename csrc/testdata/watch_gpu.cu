// watch_gpu.cu — NCCL's watch (csrc/mgpu_ncclwatch.c) against the NCCL this machine has, on one
// GPU or more: run_watch_gpu.sh builds it with the harness, runs it as WORLD local ranks and
// prints each rank's counts. What it does, and what the counts must then say:
//   a self send and receive (every rank to itself)         learner Send 1, Recv 1
//   the same inside the driver's window                      own Send 1, Recv 1
//   the same from a second thread while the window is open   learner Send +1, Recv +1
//   MGPU_NCCL_OWN(ncclAllReduce)                             own AllReduce 1 (0 on one rank:
//                                                            NCCL reports no one-rank collective)
//   ncclAllReduce outside any window                         learner AllReduce 1 (0 on one rank)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"

static ncclComm_t comm;
static float *a, *b;
static cudaStream_t stream;
static int me, dev;
enum { N = 1024 };

static void self_exchange(void) {
  MGPU_NCCL(ncclGroupStart());
  MGPU_NCCL(ncclSend(a, N, ncclFloat, me, comm, stream));
  MGPU_NCCL(ncclRecv(b, N, ncclFloat, me, comm, stream));
  MGPU_NCCL(ncclGroupEnd());
}

static void *other_thread(void *arg) {
  (void)arg;
  MGPU_CUDA(cudaSetDevice(dev));
  self_exchange();
  return NULL;
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  ncclUniqueId id;
  mgpu_init(&ctx, argc, argv);
  me = ctx.rank;
  dev = ctx.device;
  mgpu_nccl_unique_id(&ctx, &id);
  MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));
  MGPU_CUDA(cudaMalloc(&a, N * sizeof(float)));
  MGPU_CUDA(cudaMalloc(&b, N * sizeof(float)));
  MGPU_CUDA(cudaStreamCreate(&stream));

  self_exchange();
  mgpu_nccl_own(1);
  self_exchange();
  pthread_t t;
  pthread_create(&t, NULL, other_thread, NULL);
  pthread_join(t, NULL);
  mgpu_nccl_own(0);
  MGPU_NCCL_OWN(ncclAllReduce(a, b, N, ncclFloat, ncclSum, comm, stream));
  MGPU_NCCL(ncclAllReduce(a, b, N, ncclFloat, ncclSum, comm, stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
  /* WATCH_REPS=N: the time of N self exchanges (a group of one ncclSend and one ncclRecv,
   * 4 KiB), the stream synchronized at the end, printed per exchange: run_watch_gpu.sh runs it
   * with the watch and without, to show what the plugin costs a call. */
  const char *reps_s = getenv("WATCH_REPS");
  long reps = reps_s ? atol(reps_s) : 0;
  for (int round = 0; reps > 0 && round < 5; round++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < reps; i++) self_exchange();
    MGPU_CUDA(cudaStreamSynchronize(stream));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("rank %d round %d: %.3f us per self exchange (%ld)\n", me, round,
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / reps, reps);
  }
  MGPU_NCCL(ncclCommDestroy(comm)); /* the counts outlive the communicator */
  return mgpu_finish(&ctx);
}
