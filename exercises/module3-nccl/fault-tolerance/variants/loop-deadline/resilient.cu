/*
 * Variant loop-deadline: the reference solution with the deadline computed once, before the
 * loop, instead of once per all-reduce (the header says each all-reduce gets timeout_ms from
 * its call to its completion). It gives up timeout_ms after the loop starts whatever happens.
 * In the fault case that is 3000 ms, and the kill comes at 4500 ms: the loop gives up with
 * every rank alive. (With a kill earlier than the per-all-reduce timeout it would look like a
 * detection, which is why the manifest's kill comes later.) Must fail at correctness (an error
 * before the kill).
 */
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "fault-tolerance.h"

namespace {

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void pause_briefly() {
  timespec ts = {0, 20000}; // 20 µs: polls stay cheap for the CPU and quick to notice
  nanosleep(&ts, nullptr);
}

// Polls until the communicator leaves ncclInProgress. Returns its state (ncclSuccess or an
// error), or FT_TIMED_OUT.
int wait_ready(ncclComm_t comm, double deadline) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (now_ms() > deadline) return FT_TIMED_OUT;
    sched_yield();
  }
}

int give_up(ncclComm_t comm, int status, const char *what) {
  fprintf(stderr, "[resilient] %s: %s; aborting the communicator\n", what,
          status == FT_TIMED_OUT ? "deadline passed" : ncclGetErrorString((ncclResult_t)status));
  if (comm != nullptr) ncclCommAbort(comm); // its own result does not change the verdict
  return status;
}

cudaEvent_t completion_event() {
  static cudaEvent_t ev = nullptr;
  static int device = -1;
  int dev = -1;
  MGPU_CUDA(cudaGetDevice(&dev));
  if (ev == nullptr || dev != device) {
    MGPU_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    device = dev;
  }
  return ev;
}

} // namespace

int ft_make_comm(int rank, int world, const ncclUniqueId *id, int timeout_ms,
                 ncclComm_t *comm) {
  const double deadline = now_ms() + timeout_ms;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  *comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(comm, world, *id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    int st = give_up(*comm, r, "ncclCommInitRankConfig");
    *comm = nullptr;
    return st;
  }
  int st = wait_ready(*comm, deadline);
  if (st != ncclSuccess) {
    give_up(*comm, st, "communicator initialization");
    *comm = nullptr;
    return st;
  }
  return 0;
}

int ft_allreduce_loop(ncclComm_t comm, const float *send, float *recv, size_t n, int iters,
                      int timeout_ms, cudaStream_t stream, int *completed) {
  cudaEvent_t done = completion_event();
  *completed = 0;
  // The bug: one deadline for the whole loop instead of one per all-reduce.
  const double deadline = now_ms() + timeout_ms;
  for (int i = 0; i < iters; i++) {
    ncclResult_t r = ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, stream);
    if (r == ncclInProgress) {
      int st = wait_ready(comm, deadline);
      if (st != ncclSuccess) return give_up(comm, st, "enqueueing ncclAllReduce");
    } else if (r != ncclSuccess) {
      return give_up(comm, r, "ncclAllReduce");
    }
    cudaError_t ce = cudaEventRecord(done, stream);
    if (ce != cudaSuccess) return give_up(comm, ncclUnhandledCudaError, "cudaEventRecord");
    for (;;) {
      ce = cudaEventQuery(done);
      if (ce == cudaSuccess) break;
      if (ce != cudaErrorNotReady) return give_up(comm, ncclUnhandledCudaError, "cudaEventQuery");
      ncclResult_t state = ncclSuccess;
      r = ncclCommGetAsyncError(comm, &state);
      if (r != ncclSuccess) return give_up(comm, r, "ncclCommGetAsyncError");
      if (state != ncclSuccess && state != ncclInProgress)
        return give_up(comm, state, "asynchronous error");
      if (now_ms() > deadline) return give_up(comm, FT_TIMED_OUT, "waiting for an all-reduce");
      pause_briefly();
    }
    *completed = i + 1;
  }
  return 0;
}
