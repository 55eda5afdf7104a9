/*
 * driver.cu — module3/fault-tolerance (course-owned).
 *
 * One process per GPU, launched with keep_going: when a rank dies the launcher leaves the
 * others running (the job timeout still applies). The fault plan comes from MGPU_FAULT
 * ("kill:rank=R:after_ms=T", set by the manifest).
 *
 * 1. Every rank creates its communicator with the learner's ft_make_comm.
 * 2. Case "healthy": a short loop of all-reduces with the learner's ft_allreduce_loop; it must
 *    return 0 having completed every iteration, and recv must hold the exact sums.
 * 3. Case "fault": every rank meets at a barrier, then starts a loop of all-reduces that would
 *    run for a very long time. On rank R a thread of this driver writes a note and raises
 *    SIGKILL on its own process T ms after the barrier. Each surviving rank must get an error
 *    back from the learner's loop within kDetectLimitMs of the kill (and not before it), and
 *    the communicator must have been aborted: nothing of it may still be running on the GPU.
 *    The detection latency is recorded as a value.
 * Surviving ranks then write their done record and leave with _exit(0): the communicator is
 * gone and its peer is dead, so no library teardown is attempted.
 *
 * Rank R ends killed by SIGKILL without a done record: that is the fault plan, not a crash.
 * The manifest's cases are on rank 0 (a survivor); other survivors report them too.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "fault-tolerance.h"

enum {
  kInitTimeoutMs = 60000,
  kHealthyIters = 4,
  kHealthyTimeoutMs = 20000, /* the first all-reduce also sets up the connections */
  kFaultTimeoutMs = 3000,    /* per all-reduce once the fault loop runs */
  kFaultIters = 1 << 30,     /* far more than fit before the kill */
  kDetectLimitMs = 10000,    /* from the kill to the learner's error */
  kEarlySlackMs = 100,       /* barrier skew allowed before the kill time */
  kIdleWaitMs = 2000         /* after the error, how long the stream may take to drain */
};

static void sleep_ms(double ms) {
  struct timespec ts;
  if (ms <= 0) return;
  ts.tv_sec = (time_t)(ms / 1000.0);
  ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000.0) * 1e6);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

typedef struct killer {
  double after_ms;
  int rank;
} killer;

static void *killer_main(void *arg) {
  const killer *k = (const killer *)arg;
  sleep_ms(k->after_ms);
  mgpu_note("fault plan: rank %d kills itself now with SIGKILL (%.0f ms after the barrier)",
            k->rank, k->after_ms);
  kill(getpid(), SIGKILL);
  return NULL;
}

static const char *status_name(int st) {
  if (st == FT_TIMED_OUT) return "FT_TIMED_OUT (deadline)";
  return ncclGetErrorString((ncclResult_t)st);
}

static void fail_case(const char *name, long long n, const char *msg) {
  mgpu_result r;
  mgpu_result_init(&r, n);
  snprintf(r.msg, sizeof r.msg, "%s", msg);
  mgpu_record_case(name, &r, 1);
}

static void host_sum(float *want, uint64_t seed, int world, long long n) {
  long long i;
  int r;
  for (i = 0; i < n; i++) want[i] = 0.0f;
  for (r = 0; r < world; r++) {
    uint64_t key = mgpu_exact_key(seed, r, 0);
    for (i = 0; i < n; i++) want[i] += mgpu_fine_value_k(key, i);
  }
}

/* Case "healthy": returns 1 when the communicator is still usable afterwards. */
static int run_healthy(const mgpu_ctx *ctx, const char *name, long long n, ncclComm_t comm,
                       mgpu_buf *send, mgpu_buf *recv, cudaStream_t stream) {
  mgpu_result r;
  float *want, *host;
  int done = -1, st;
  long long i;

  mgpu_poison(recv, stream);
  mgpu_fill_fine_f32((float *)send->ptr, n, ctx->seed, ctx->rank, 0, stream);
  MGPU_CUDA(cudaStreamSynchronize(stream));
  st = ft_allreduce_loop(comm, (const float *)send->ptr, (float *)recv->ptr, (size_t)n,
                         kHealthyIters, kHealthyTimeoutMs, stream, &done);
  if (st != 0) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "with every rank alive, ft_allreduce_loop returned %s after %d of %d iterations",
             status_name(st), done, kHealthyIters);
    fail_case(name, n, msg);
    return 0;
  }
  mgpu_result_init(&r, n);
  want = (float *)malloc((size_t)n * sizeof(float));
  if (!want) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  MGPU_CUDA(cudaMallocHost((void **)&host, (size_t)n * sizeof(float)));
  host_sum(want, ctx->seed, ctx->world, n);
  MGPU_CUDA(cudaMemcpyAsync(host, recv->ptr, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost,
                            stream));
  MGPU_CUDA(cudaStreamSynchronize(stream));
  for (i = 0; i < n; i++) mgpu_result_add(&r, i, host[i], want[i], 0.0);
  r.guard_hits = mgpu_guard_hits(send) + mgpu_guard_hits(recv);
  if (done != kHealthyIters)
    snprintf(r.msg, sizeof r.msg, "ft_allreduce_loop returned 0 but reported %d of %d iterations",
             done, kHealthyIters);
  else if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "with every rank alive, recv must hold the sum of every rank's send");
  mgpu_record_case(name, &r, done != kHealthyIters);
  MGPU_CUDA(cudaFreeHost(host));
  free(want);
  return 1;
}

/* Waits up to kIdleWaitMs for `stream` to have nothing left running. */
static int stream_drains(cudaStream_t stream) {
  double deadline = mgpu_now_us() + kIdleWaitMs * 1000.0;
  for (;;) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q != cudaErrorNotReady) {
      (void)cudaGetLastError(); /* an aborted kernel may leave an error here; it is not ours */
      return 1;
    }
    if (mgpu_now_us() > deadline) return 0;
    sleep_ms(1);
  }
}

/* Case "fault". Never returns on the victim (it is killed). */
static void run_fault(const mgpu_ctx *ctx, const char *name, long long n, ncclComm_t comm,
                      int victim, double after_ms, mgpu_buf *send, mgpu_buf *recv,
                      cudaStream_t stream) {
  killer k;
  pthread_t thread;
  double t0, t1, elapsed_ms, latency_ms;
  int done = -1, st;
  mgpu_result r;

  mgpu_barrier((mgpu_ctx *)ctx, "fault-start");
  t0 = mgpu_now_us();
  if (ctx->rank == victim) {
    k.after_ms = after_ms;
    k.rank = ctx->rank;
    if (pthread_create(&thread, NULL, killer_main, &k) != 0)
      mgpu_fail("driver", "pthread_create", __FILE__, __LINE__, 0, "cannot start the fault thread");
  }
  st = ft_allreduce_loop(comm, (const float *)send->ptr, (float *)recv->ptr, (size_t)n,
                         kFaultIters, kFaultTimeoutMs, stream, &done);
  t1 = mgpu_now_us();
  elapsed_ms = (t1 - t0) / 1000.0;
  latency_ms = elapsed_ms - after_ms;

  if (ctx->rank == victim) {
    /* Still alive: the loop gave up before its own process was killed. */
    char msg[320];
    snprintf(msg, sizeof msg,
             "the rank the fault plan kills returned from ft_allreduce_loop before the kill "
             "(%s after %.0f ms, %d iterations): with all ranks alive the loop must keep going",
             status_name(st), elapsed_ms, done);
    fail_case(name, n, msg);
    for (;;) sleep_ms(1000); /* the fault thread ends this process */
  }

  /* Four checks, recorded as four elements (1 = met) so that the report shows which failed:
   * 0 an error was returned, 1 not before the kill, 2 within the limit, 3 nothing of the
   * communicator left running on the stream. */
  {
    const int returned_error = st != 0;
    const int not_early = elapsed_ms >= after_ms - kEarlySlackMs;
    const int in_time = latency_ms <= kDetectLimitMs;
    const int drained = returned_error ? stream_drains(stream) : 1;
    mgpu_result_init(&r, n);
    mgpu_result_add(&r, 0, returned_error, 1, 0);
    mgpu_result_add(&r, 1, not_early, 1, 0);
    mgpu_result_add(&r, 2, in_time, 1, 0);
    mgpu_result_add(&r, 3, drained, 1, 0);
    if (returned_error && not_early) mgpu_value("fault detection latency", latency_ms, "ms");
    if (!returned_error)
      snprintf(r.msg, sizeof r.msg,
               "check 0: ft_allreduce_loop returned 0 (%d iterations) although rank %d died "
               "%.0f ms into the loop",
               done, victim, after_ms);
    else if (!not_early)
      snprintf(r.msg, sizeof r.msg,
               "check 1: ft_allreduce_loop returned %s after %.0f ms, before rank %d was killed "
               "(at %.0f ms): an error with every rank alive",
               status_name(st), elapsed_ms, victim, after_ms);
    else if (!in_time)
      snprintf(r.msg, sizeof r.msg,
               "check 2: ft_allreduce_loop returned %s %.0f ms after rank %d was killed; the "
               "limit is %d ms",
               status_name(st), latency_ms, victim, (int)kDetectLimitMs);
    else if (!drained)
      snprintf(r.msg, sizeof r.msg,
               "check 3: ft_allreduce_loop returned %s %.0f ms after the kill, but the "
               "all-reduce is still running on the GPU %d ms later: abort the communicator "
               "(ncclCommAbort) before returning",
               status_name(st), latency_ms, (int)kIdleWaitMs);
    else
      snprintf(r.msg, sizeof r.msg,
               "rank %d was killed %.0f ms into the loop; this rank returned %s %.0f ms later, "
               "after %d all-reduces, with the communicator aborted",
               victim, after_ms, status_name(st), latency_ms, done);
    mgpu_record_case(name, &r, 0);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  mgpu_buf send, recv;
  double after_ms = 0;
  long long n_healthy, n_fault, n_max;
  int victim, st, usable;

  mgpu_init(&ctx, argc, argv);
  MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  victim = mgpu_fault_kill_rank(&ctx, &after_ms);
  n_healthy = mgpu_case_n(&ctx, "healthy", 1000003);
  n_fault = mgpu_case_n(&ctx, "fault", 1048576);
  n_max = n_healthy > n_fault ? n_healthy : n_fault;
  if (n_max < 1) n_max = 1;
  send = mgpu_alloc((size_t)n_max * sizeof(float), ctx.device);
  recv = mgpu_alloc((size_t)n_max * sizeof(float), ctx.device);

  mgpu_nccl_unique_id(&ctx, &id);
  st = ft_make_comm(ctx.rank, ctx.world, &id, kInitTimeoutMs, &comm);
  if (st != 0 || comm == NULL) {
    char msg[256];
    snprintf(msg, sizeof msg, "no communicator: ft_make_comm returned %s",
             st != 0 ? status_name(st) : "0 with a NULL communicator");
    fail_case("healthy", n_healthy, msg);
    fail_case("fault", n_fault, msg);
    mgpu_finish(&ctx);
    fflush(NULL);
    _exit(0);
  }

  usable = run_healthy(&ctx, "healthy", n_healthy, comm, &send, &recv, stream);
  if (!usable) {
    fail_case("fault", n_fault, "not run: the healthy loop already failed");
  } else if (victim < 0 || victim >= ctx.world) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "MGPU_FAULT=\"%s\" names no rank of this %d-rank run: the fault case needs the "
             "manifest's fault plan",
             ctx.fault ? ctx.fault : "", ctx.world);
    fail_case("fault", n_fault, msg);
    (void)ncclCommAbort(comm);
  } else {
    mgpu_fill_fine_f32((float *)send.ptr, n_fault, ctx.seed, ctx.rank, 1, stream);
    MGPU_CUDA(cudaStreamSynchronize(stream));
    run_fault(&ctx, "fault", n_fault, comm, victim, after_ms, &send, &recv, stream);
  }

  mgpu_finish(&ctx);
  fflush(NULL);
  _exit(0); /* no CUDA or NCCL teardown: the communicator is aborted and a peer is dead */
}
