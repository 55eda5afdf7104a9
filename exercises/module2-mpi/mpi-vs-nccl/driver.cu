/*
 * driver.cu — module2/mpi-vs-nccl (course-owned).
 *
 * One process per GPU, started by mpirun with a CUDA-aware MPI. mgpu_init picks this rank's
 * GPU before MPI_Init; the driver refuses to go on when MPIX_Query_cuda_support() says the MPI
 * cannot take device pointers.
 *
 * Set-up: nccl_from_mpi(comm) is called once, under a watchdog: ncclCommInitRank waits for
 * every rank to join with the same unique id and never returns otherwise, so after
 * kInitWatchdogS the rank reports where it hangs (error record, exit 1) instead of running into
 * the job's time-out. The communicator must then have the launcher's size, this process's MPI
 * rank and this rank's GPU; if not, every case fails with the reason and no NCCL work is run.
 *
 * Correctness, per case (n = floats per rank; odd sizes and a prime), kRounds rounds with
 * fresh data (fine exact values from the harness, multiples of 1/64: every sum is exact in
 * any order, so the comparison is exact), three parts per round:
 *   (a) MPI: recv poisoned, send filled with STALE values and the stream drained; all ranks
 *       meet; then a kDelayUs spin kernel and the fill of send with the round's data are
 *       queued on the (non-blocking) stream and mpi_sum is called at once. When it returns,
 *       recv must hold the sum. An mpi_sum that does not finish the stream first hands MPI the
 *       stale values — every time, since the fill is 20 ms away; the report says so.
 *   (b) NCCL: recv poisoned; delay + fill queued; nccl_sum; the driver reads recv ON THE STREAM
 *       (work left on another stream shows as poison). A watchdog (mgpu_wait_or_hang) turns a
 *       collective that never completes into a report.
 *   (c) NCCL, then MPI: mid and recv poisoned; delay + fill; nccl_sum(send -> mid);
 *       mpi_sum(mid -> recv): recv = world x the sum. mpi_sum must wait for the NCCL
 *       all-reduce queued on the stream before MPI reads mid; otherwise MPI reads the poison.
 *   Every element of every part is compared on the host (tolerance 0) and counted in one case
 *   record (index = part x n + i); guard bands around send, mid and recv must stay untouched.
 *   mpi_sum is watched in (a) and (c): this driver's MPI_Allreduce and MPI_Iallreduce wrap the
 *   library's PMPI_ ones and add up the floats MPI summed on the device buffers mpi_sum was given
 *   (MPI_FLOAT, MPI_SUM, all ranks). A call short of n such floats fails the case even when the
 *   sums are right: it staged through host memory, whatever the copy was called, or used NCCL.
 *
 * The checks are each rank's verifier's (`verifier: true`, docs/protocol.md §4), on the CPU:
 * the rank hands over whether the communicator is usable (and why not), then per round and part
 * recv as it read it back on the stream, per case the watch of mpi_sum and the guard count; it fills only its own inputs
 * and never knows the other ranks' or the sums. The verifier makes no MPI, NCCL or CUDA call
 * (it has no GPU and is not one of mpirun's processes).
 *
 * Performance (metric "time", µs per all-reduce; headline "nccl-64MiB"):
 *   "nccl-*" cases: YOUR nccl_sum against the COURSE's MPI_Allreduce on device buffers (its own
 *       buffers and communicator; a stream synchronize before it, as any MPI call on stream
 *       data needs). The target is that NCCL is faster by min_ratio.
 *   "mpi-*" cases: YOUR mpi_sum against the same course MPI_Allreduce: shown, not judged.
 *   Why the baseline is the course's MPI call and not your own mpi_sum: with your MPI path as the
 *   baseline, slowing it down (a sleep, a barrier, copies) would pass the target; the target
 *   must measure your NCCL path against something you cannot change. Your mpi_sum is shown
 *   next to the same baseline, so you see that it costs what MPI costs.
 *   Each sample: all ranks meet (MPI_Barrier), `iters` operations, a stream synchronize; host
 *   time / iters, the maximum over ranks (MPI_Allreduce), so every rank records the same series;
 *   yours and the baseline alternate (ABAB), each with its own `iters` (the two differ by a
 *   large factor). The driver times by itself because both MPI paths block the host: the
 *   harness's start gate (mgpu_time_pair) would time out on them.
 * After each timed case, case "timed-<perf case>" (not in MGPU_CASES): recv must still hold the sum
 * of the timed calls' inputs (the baseline writes buffers of its own, so your last timed call
 * wrote it); then send gets data no call has seen, recv is poisoned, and one more of your
 * operations on the timed buffers and stream must produce the new sum. Code that stops working
 * once it has been called often enough, or on the same buffers again, fails here. The rank
 * hands both recvs and the guard count over; the verifier checks them (two sums on the CPU,
 * whatever the number of timed calls: every timed call had the same inputs).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <nccl.h>
#include <cuda_runtime.h>

#include "mgpu.h"
#include "mpi-vs-nccl.h"

enum { kRounds = 2, kMaxSamples = 200 };
static const double kDelayUs = 20000.0;      /* the fill waits this long behind a spin kernel */
static const double kInitWatchdogS = 45.0;   /* NCCL's start-up takes seconds at most */
static const double kCollectiveWatchdogS = 30.0;
static const double kSampleUs = 3000.0;      /* a timing sample lasts at least this long */
static const long long kMaxN = 1LL << 28;    /* MPI counts are ints; cases stay far below */

/* ---- mpi_sum's MPI_Allreduce, watched ----------------------------------------------------- */

/* While mpi_sum runs in a correctness round, this driver's MPI_Allreduce (and MPI_Iallreduce),
 * thin wrappers over the library's PMPI_ functions (the MPI profiling interface), add up the
 * floats that MPI summed for it: MPI_FLOAT, MPI_SUM, over a communicator of all ranks, into the
 * recv mpi_sum was given, from its send (or MPI_IN_PLACE), both device memory. A call of
 * mpi_sum after which fewer than n floats were summed that way did not hand MPI the device
 * pointers: it staged the data through host memory (under whatever copy's name), or summed
 * some other way (NCCL). The rank counts; the verifier judges. */
typedef struct sum_watch {
  int on;                       /* inside mpi_sum */
  const void *send, *recv;      /* what mpi_sum was given */
  long long n, world;
  long long device_floats;      /* summed by MPI on the device buffers, this call */
  long long host_calls;         /* MPI_Allreduce calls with a buffer that is not device memory */
} sum_watch;
static sum_watch g_sum;

/* What the rank hands over per case: mpi_sum calls, those short of n device floats, and the
 * MPI_Allreduce calls they made on other memory. */
typedef struct sum_facts {
  long long calls, short_calls, host_calls;
} sum_facts;

static int device_buffer(const void *p, const void *base, long long n) {
  cudaPointerAttributes a;
  const char *c = (const char *)p, *b = (const char *)base;
  if (p == NULL || c < b || c >= b + n * (long long)sizeof(float)) return 0;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return a.type == cudaMemoryTypeDevice;
}

static void sum_note(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm) {
  int size = 0;
  if (!g_sum.on) return;
  if (datatype == MPI_FLOAT && op == MPI_SUM && count > 0 &&
      PMPI_Comm_size(comm, &size) == MPI_SUCCESS && size == g_sum.world &&
      device_buffer(recvbuf, g_sum.recv, g_sum.n) &&
      (sendbuf == MPI_IN_PLACE || device_buffer(sendbuf, g_sum.send, g_sum.n)))
    g_sum.device_floats += count;
  else
    g_sum.host_calls++;
}

static void sum_watch_on(const void *send, const void *recv, long long n, int world) {
  g_sum.on = 1;
  g_sum.send = send;
  g_sum.recv = recv;
  g_sum.n = n;
  g_sum.world = world;
  g_sum.device_floats = 0;
}

static void sum_watch_off(sum_facts *f) {
  g_sum.on = 0;
  f->calls++;
  if (g_sum.device_floats < g_sum.n) f->short_calls++;
  f->host_calls += g_sum.host_calls;
  g_sum.host_calls = 0;
}

extern "C" {
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  sum_note(sendbuf, recvbuf, count, datatype, op, comm);
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request) {
  sum_note(sendbuf, recvbuf, count, datatype, op, comm);
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}
} /* extern "C" */

/* ---- helpers ------------------------------------------------------------------------------- */

static void delay(cudaStream_t s) {
  mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
}

/* Data iterations of the exact generator: part p of round r, and the stale fill. */
static int data_iter(int c, int round, int part) { return c * 64 + round * 8 + part; }
enum { kPartMPI = 0, kPartNCCL = 1, kPartChain = 2, kStaleMPI = 3 };
/* The timed data of perf case p, and the data of its after-timing call: no correctness part
 * uses either (data_iter stays below 64 x 64 with fewer than 64 cases). */
enum { kTimedIter = 5000, kAfterTimingIter = 6000 };

/* want[i] = scale * sum over ranks of mgpu_fine_value(seed, r, iter, i): exact in float.
 * Only where the checks are made: a split rank cannot make another rank's inputs. */
static void host_sum(float *want, const mgpu_ctx *ctx, int iter, long long n, float scale) {
  long long i;
  int r;
  for (i = 0; i < n; i++) want[i] = 0.0f;
  for (r = 0; r < ctx->world; r++) {
    const uint64_t key = mgpu_exact_key(ctx->seed, r, iter);
    for (i = 0; i < n; i++) want[i] += mgpu_fine_value_k(key, i);
  }
  if (scale != 1.0f)
    for (i = 0; i < n; i++) want[i] *= scale;
}

/* Host copies of what the rank reads back: pinned in the rank, which reads them from the GPU;
 * plain memory in the verifier, where they arrive. */
static float *host_alloc(const mgpu_ctx *ctx, size_t bytes) {
  float *p = NULL;
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMallocHost((void **)&p, bytes ? bytes : 4));
  } else {
    p = (float *)malloc(bytes ? bytes : 4);
    if (!p) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  }
  return p;
}

static void host_free(const mgpu_ctx *ctx, float *p) {
  if (mgpu_computes(ctx)) MGPU_CUDA(cudaFreeHost(p));
  else free(p);
}

/* Host memory for expected values: only where the checks are made (NULL elsewhere). */
static float *want_alloc(const mgpu_ctx *ctx, size_t bytes) {
  float *p;
  if (!mgpu_verifies(ctx)) return NULL;
  p = (float *)malloc(bytes ? bytes : 4);
  if (!p) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  return p;
}

/* ---- MPI ----------------------------------------------------------------------------------- */

static int mpi_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support();
#else
  return -1;
#endif
}

static void start_mpi(mgpu_ctx *ctx, int *argc, char ***argv, MPI_Comm *comms, int n) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING + 1], msg[600], *nl;
  int rank, world, len = 0, aware, i;
  MGPU_MPI(MPI_Init(argc, argv));
  mgpu_mpi_errors_return();
  MGPU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MGPU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world));
  if (rank != ctx->rank || world != ctx->world) {
    snprintf(msg, sizeof msg, "MPI says rank %d of %d, the launcher's environment %d of %d", rank,
             world, ctx->rank, ctx->world);
    mgpu_fail("harness", "MPI_Comm_rank", __FILE__, __LINE__, rank, msg);
  }
  MGPU_MPI(MPI_Get_library_version(version, &len));
  version[len < 0 ? 0 : len > MPI_MAX_LIBRARY_VERSION_STRING ? MPI_MAX_LIBRARY_VERSION_STRING : len] = 0;
  if ((nl = strchr(version, '\n')) != NULL) *nl = 0;
  if ((nl = strchr(version, ',')) != NULL) *nl = 0;
  aware = mpi_cuda_aware();
  if (aware == 0) {
    snprintf(msg, sizeof msg,
             "%s is not CUDA-aware: MPIX_Query_cuda_support() returned 0, so a device pointer "
             "passed to MPI would crash it. Nothing was run. Use a CUDA-aware MPI "
             "(`mgpu-learn doctor` shows which MPI the course found)",
             version);
    mgpu_fail("harness", "MPIX_Query_cuda_support", __FILE__, __LINE__, 0, msg);
  }
  if (ctx->rank == 0)
    mgpu_note("MPI: %s; MPIX_Query_cuda_support() = %s", version,
              aware == 1 ? "1 (CUDA-aware)" : "not available (this MPI cannot say; assumed aware)");
  for (i = 0; i < n; i++) {
    MGPU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]));
    MGPU_MPI(MPI_Comm_set_errhandler(comms[i], MPI_ERRORS_RETURN));
  }
}

static double max_over_ranks(double v) {
  double out = v;
  MGPU_MPI(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

/* ---- the communicator ---------------------------------------------------------------------- */

typedef struct watchdog {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  const mgpu_ctx *ctx;
} watchdog;

static void *watch_init(void *arg) {
  watchdog *w = (watchdog *)arg;
  struct timespec until;
  int fire;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)kInitWatchdogS;
  pthread_mutex_lock(&w->mu);
  while (!w->done)
    if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT) break;
  fire = !w->done;
  pthread_mutex_unlock(&w->mu);
  if (fire) {
    char msg[500];
    snprintf(msg, sizeof msg,
             "nccl_from_mpi never finished on rank %d of %d (the driver waited %.0f s; NCCL's "
             "start-up takes seconds): ncclCommInitRank returns only when all %d ranks have "
             "joined with the same unique id. Did rank 0 make the id (ncclGetUniqueId) and "
             "MPI_Bcast it to every rank, and did every rank call ncclCommInitRank with it?",
             w->ctx->rank, w->ctx->world, kInitWatchdogS, w->ctx->world);
    mgpu_fail("learner", "nccl_from_mpi", __FILE__, __LINE__, 0, msg);
  }
  return NULL;
}

static ncclComm_t make_comm(const mgpu_ctx *ctx, MPI_Comm comm) {
  watchdog w;
  pthread_t th;
  ncclComm_t nc = NULL;
  memset(&w, 0, sizeof w);
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  w.ctx = ctx;
  if (pthread_create(&th, NULL, watch_init, &w) != 0)
    mgpu_fail("driver", "pthread_create", __FILE__, __LINE__, 0, "cannot start the watchdog");
  (void)comm; /* unused in the verifier, which never calls this */
  MGPU_LEARNER(nc = nccl_from_mpi(comm));
  pthread_mutex_lock(&w.mu);
  w.done = 1;
  pthread_cond_signal(&w.cv);
  pthread_mutex_unlock(&w.mu);
  pthread_join(th, NULL);
  pthread_cond_destroy(&w.cv);
  pthread_mutex_destroy(&w.mu);
  return nc;
}

/* 1 when the communicator agrees with the launcher (size, rank, device); else 0 and why. */
static int comm_matches(ncclComm_t nc, const mgpu_ctx *ctx, char *msg, size_t len) {
  int count = -1, rank = -1, dev = -1;
  if (nc == NULL) {
    snprintf(msg, len,
             "nccl_from_mpi returned NULL: there is no NCCL communicator, so the NCCL parts were "
             "not run (rank 0 makes the id, MPI_Bcast hands it out, every rank calls "
             "ncclCommInitRank)");
    return 0;
  }
  MGPU_NCCL(ncclCommCount(nc, &count));
  MGPU_NCCL(ncclCommUserRank(nc, &rank));
  MGPU_NCCL(ncclCommCuDevice(nc, &dev));
  if (count != ctx->world) {
    snprintf(msg, len, "the NCCL communicator has %d ranks; MPI has %d", count, ctx->world);
    return 0;
  }
  if (rank != ctx->rank) {
    snprintf(msg, len,
             "MPI rank %d's NCCL communicator says it is rank %d: pass ncclCommInitRank this "
             "process's rank in comm, so that rank numbers mean the same in MPI and NCCL",
             ctx->rank, rank);
    return 0;
  }
  if (dev != ctx->device) {
    snprintf(msg, len, "the NCCL communicator uses GPU %d; this rank's GPU is %d", dev,
             ctx->device);
    return 0;
  }
  return 1;
}

/* ---- correctness --------------------------------------------------------------------------- */

typedef struct part_tally {
  long long wrong, nan, stale;
} part_tally;

/* The rank reads recv back on the stream (after whatever the learner queued there) into host
 * and hands it over under tag. Returns 1 where the checks are made (host then holds it). */
static int read_back(mgpu_ctx *ctx, const char *tag, const mgpu_buf *recv, float *host,
                     long long n, cudaStream_t s) {
  if (mgpu_computes(ctx)) {
    MGPU_CUDA(cudaMemcpyAsync(host, recv->ptr, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost,
                              s));
    MGPU_CUDA(cudaStreamSynchronize(s));
  }
  return mgpu_hand_over(ctx, tag, host, (size_t)n * sizeof(float));
}

/* Adds host (recv as read back) compared with want into r at offset, and counts. */
static void compare_part(mgpu_result *r, long long offset, const float *host, const float *want,
                         const float *stale_want, long long n, part_tally *t) {
  long long i;
  for (i = 0; i < n; i++) {
    const long long before = r->bad + r->unwritten;
    mgpu_result_add(r, offset + i, host[i], want[i], 0.0);
    if (r->bad + r->unwritten == before) continue;
    t->wrong++;
    if (isnan(host[i])) t->nan++;
    else if (stale_want && host[i] == stale_want[i]) t->stale++;
  }
}

static void collective_watch(const mgpu_ctx *ctx, cudaStream_t s, const char *what) {
  char hint[300];
  snprintf(hint, sizeof hint,
           "%s queued work that never completed: an NCCL collective waits until every rank has "
           "called it with the same count on the same communicator",
           what);
  mgpu_wait_or_hang(ctx, s, kCollectiveWatchdogS, what, hint);
}

/* Guard bytes hit around the buffers: counted by the rank, handed over under tag. Returns 1
 * where the checks are made (*hits then holds the count). */
static int hand_over_guards(mgpu_ctx *ctx, const char *tag, const mgpu_buf *a, const mgpu_buf *b,
                            const mgpu_buf *c, long long *hits) {
  *hits = 0;
  if (mgpu_computes(ctx))
    *hits = mgpu_guard_hits(a) + mgpu_guard_hits(b) + (c ? mgpu_guard_hits(c) : 0);
  return mgpu_hand_over(ctx, tag, hits, sizeof *hits);
}

static void run_case(mgpu_ctx *ctx, int ci, MPI_Comm comm, ncclComm_t nc, int usable,
                     const char *problem, cudaStream_t s) {
  const mgpu_case *c = &ctx->cases[ci];
  const long long n = c->n;
  const size_t bytes = (size_t)n * sizeof(float);
  mgpu_buf send, mid, recv;
  float *want, *stale, *host;
  part_tally t[3];
  mgpu_result r;
  long long hits = 0;
  sum_facts facts = {0, 0, 0};
  char tag[160];
  int round, force;
  (void)comm; /* the learner's, in the rank only */
  (void)nc;

  if (n < 1 || n > kMaxN) mgpu_fail("driver", "case", __FILE__, __LINE__, n, "case size out of range");
  memset(&send, 0, sizeof send);
  memset(&mid, 0, sizeof mid);
  memset(&recv, 0, sizeof recv);
  if (mgpu_computes(ctx)) {
    send = mgpu_alloc(bytes, ctx->device);
    mid = mgpu_alloc(bytes, ctx->device);
    recv = mgpu_alloc(bytes, ctx->device);
  }
  host = host_alloc(ctx, bytes);
  want = want_alloc(ctx, bytes);
  stale = want_alloc(ctx, bytes);
  memset(t, 0, sizeof t);
  mgpu_result_init(&r, n);

  for (round = 0; round < kRounds; round++) {
    /* (a) MPI on device buffers whose data is still being written on the stream. */
    if (mgpu_computes(ctx)) {
      mgpu_poison(&recv, s);
      mgpu_fill_fine_f32((float *)send.ptr, n, ctx->seed, ctx->rank,
                          data_iter(ci, round, kStaleMPI), s);
      MGPU_CUDA(cudaStreamSynchronize(s));
      MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
      delay(s);
      mgpu_fill_fine_f32((float *)send.ptr, n, ctx->seed, ctx->rank,
                          data_iter(ci, round, kPartMPI), s);
      sum_watch_on(send.ptr, recv.ptr, n, ctx->world);
      MGPU_LEARNER(mpi_sum((const float *)send.ptr, (float *)recv.ptr, (size_t)n, s, comm));
      sum_watch_off(&facts);
      MGPU_CUDA(cudaStreamSynchronize(s));
    }
    snprintf(tag, sizeof tag, "%s/%d/mpi", c->name, round);
    if (read_back(ctx, tag, &recv, host, n, s)) {
      host_sum(want, ctx, data_iter(ci, round, kPartMPI), n, 1.0f);
      host_sum(stale, ctx, data_iter(ci, round, kStaleMPI), n, 1.0f);
      compare_part(&r, 0, host, want, stale, n, &t[0]);
    }
    if (mgpu_computes(ctx)) MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (!usable) continue;

    /* (b) NCCL, read back on the stream. */
    if (mgpu_computes(ctx)) {
      mgpu_poison(&recv, s);
      MGPU_CUDA(cudaStreamSynchronize(s));
      MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
      delay(s);
      mgpu_fill_fine_f32((float *)send.ptr, n, ctx->seed, ctx->rank,
                          data_iter(ci, round, kPartNCCL), s);
      MGPU_LEARNER(nccl_sum(nc, (const float *)send.ptr, (float *)recv.ptr, (size_t)n, s));
      collective_watch(ctx, s, "nccl_sum");
    }
    snprintf(tag, sizeof tag, "%s/%d/nccl", c->name, round);
    if (read_back(ctx, tag, &recv, host, n, s)) {
      host_sum(want, ctx, data_iter(ci, round, kPartNCCL), n, 1.0f);
      compare_part(&r, n, host, want, NULL, n, &t[1]);
    }
    if (mgpu_computes(ctx)) MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* (c) NCCL's result handed to MPI. */
    if (mgpu_computes(ctx)) {
      mgpu_poison(&mid, s);
      mgpu_poison(&recv, s);
      MGPU_CUDA(cudaStreamSynchronize(s));
      MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
      delay(s);
      mgpu_fill_fine_f32((float *)send.ptr, n, ctx->seed, ctx->rank,
                          data_iter(ci, round, kPartChain), s);
      MGPU_LEARNER(nccl_sum(nc, (const float *)send.ptr, (float *)mid.ptr, (size_t)n, s));
      sum_watch_on(mid.ptr, recv.ptr, n, ctx->world);
      MGPU_LEARNER(mpi_sum((const float *)mid.ptr, (float *)recv.ptr, (size_t)n, s, comm));
      sum_watch_off(&facts);
      collective_watch(ctx, s, "nccl_sum, then mpi_sum");
    }
    snprintf(tag, sizeof tag, "%s/%d/chain", c->name, round);
    if (read_back(ctx, tag, &recv, host, n, s)) {
      host_sum(want, ctx, data_iter(ci, round, kPartChain), n, (float)ctx->world);
      compare_part(&r, 2 * n, host, want, NULL, n, &t[2]);
    }
    if (mgpu_computes(ctx)) MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  }
  snprintf(tag, sizeof tag, "%s/mpi-watch", c->name);
  mgpu_hand_over(ctx, tag, &facts, sizeof facts);
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  if (hand_over_guards(ctx, tag, &send, &mid, &recv, &hits)) {
    r.guard_hits = hits;
    force = !usable;

    /* One message, the most telling first. */
    if (t[0].stale * 2 > t[0].wrong && t[0].wrong)
      snprintf(r.msg, sizeof r.msg,
               "mpi_sum: %lld of the %lld wrong elements are the sum of what send held BEFORE "
               "the driver's fill kernel ran (queued on `stream` behind a %.0f ms delay): MPI "
               "read send before the stream had finished. MPI knows nothing about CUDA streams: "
               "cudaStreamSynchronize(stream) before MPI touches device data that stream work "
               "writes.",
               t[0].stale, t[0].wrong, kDelayUs / 1000.0);
    else if (t[2].nan * 2 > t[2].wrong && t[2].wrong && !t[1].wrong)
      snprintf(r.msg, sizeof r.msg,
               "NCCL, then MPI: nccl_sum alone was right, but mpi_sum on its output got the "
               "driver's NaN in %lld of %lld elements: MPI read `mid` while the NCCL all-reduce "
               "that writes it was still queued on `stream`. cudaStreamSynchronize(stream) "
               "before handing MPI a buffer that stream work writes.",
               t[2].nan, n * kRounds);
    else if (t[0].wrong)
      snprintf(r.msg, sizeof r.msg,
               "mpi_sum: %lld of %lld elements wrong (%lld NaN): recv must hold the sum over all "
               "%d ranks of their send (MPI_Allreduce, MPI_FLOAT, MPI_SUM, n elements) when "
               "mpi_sum returns.",
               t[0].wrong, n * kRounds, t[0].nan, ctx->world);
    else if (t[1].wrong)
      snprintf(r.msg, sizeof r.msg,
               "nccl_sum: %lld of %lld elements wrong (%lld NaN), read back on `stream` after "
               "your call: recv must hold the sum over all %d ranks (ncclAllReduce, ncclFloat, "
               "ncclSum), queued on the stream you were given.",
               t[1].wrong, n * kRounds, t[1].nan, ctx->world);
    else if (t[2].wrong)
      snprintf(r.msg, sizeof r.msg,
               "NCCL, then MPI: %lld of %lld elements wrong (%lld NaN) where recv must be %d x "
               "the sum (each rank's mid holds the sum; MPI sums them again).",
               t[2].wrong, n * kRounds, t[2].nan, ctx->world);
    else if (facts.short_calls) {
      force = 1;
      snprintf(r.msg, sizeof r.msg,
               "mpi_sum: the sums are right, but in %lld of its %lld calls MPI_Allreduce did not "
               "sum the n floats on the device pointers it was given (%lld MPI_Allreduce call(s) "
               "on other memory, another type, operation or communicator). Hand send and recv to "
               "MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM, comm) as they are: the MPI is "
               "CUDA-aware, so no copy through host memory, and no NCCL, in mpi_sum.",
               facts.short_calls, facts.calls, facts.host_calls);
    } else if (!usable)
      snprintf(r.msg, sizeof r.msg, "%s", problem);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg, "a write landed outside send, mid or recv (in the guard bands)");
    mgpu_record_case(c->name, &r, force);
  }

  free(stale);
  free(want);
  host_free(ctx, host);
  if (mgpu_computes(ctx)) {
    mgpu_free(&recv);
    mgpu_free(&mid);
    mgpu_free(&send);
  }
}

/* ---- performance --------------------------------------------------------------------------- */

typedef struct perf_bufs {
  mgpu_buf send, recv;   /* yours */
  float *bsend, *brecv;  /* the baseline's */
  long long n;
} perf_bufs;

static void baseline_op(const perf_bufs *b, MPI_Comm base_comm, cudaStream_t s) {
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_MPI(MPI_Allreduce(b->bsend, b->brecv, (int)b->n, MPI_FLOAT, MPI_SUM, base_comm));
}

static void yours_op(int nccl_case, const perf_bufs *b, ncclComm_t nc, MPI_Comm comm,
                     cudaStream_t s) {
  (void)b;
  (void)nc;
  (void)comm;
  (void)s;
  if (nccl_case)
    MGPU_LEARNER(nccl_sum(nc, (const float *)b->send.ptr, (float *)b->recv.ptr, (size_t)b->n, s));
  else
    MGPU_LEARNER(mpi_sum((const float *)b->send.ptr, (float *)b->recv.ptr, (size_t)b->n, s, comm));
}

/* Host time per operation of `iters` operations, the maximum over ranks. */
static double sample(int who, int iters, int nccl_case, const perf_bufs *b, ncclComm_t nc,
                     MPI_Comm comm, MPI_Comm base_comm, cudaStream_t s) {
  double t0;
  int i;
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  t0 = mgpu_now_us();
  for (i = 0; i < iters; i++) {
    if (who == 0) yours_op(nccl_case, b, nc, comm, s);
    else baseline_op(b, base_comm, s);
  }
  MGPU_CUDA(cudaStreamSynchronize(s));
  return max_over_ranks((mgpu_now_us() - t0) / iters);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_of(const double *v, int n) {
  double t[kMaxSamples];
  if (n <= 0) return NAN;
  memcpy(t, v, sizeof(double) * (size_t)n);
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int iters_for(double one_us) {
  double it = ceil(kSampleUs / (one_us > 1 ? one_us : 1));
  return it < 1 ? 1 : it > 5000 ? 5000 : (int)it;
}

/* The case "timed-<perf case>" of perf case pi: recv as the last timed call of yours left it (send
 * unchanged during the timing; the baseline writes buffers of its own), then send filled with
 * data no call has seen, recv poisoned, and one more of yours on the timed buffers and stream.
 * Every rank makes the call, whatever its own check found. The rank hands both recvs and the
 * guard count over ("<perf case>/after-timing/{last,new,guards}"); the verifier takes only
 * this part of run_perf. */
static void check_after_timing(mgpu_ctx *ctx, int pi, int nccl_case, perf_bufs *b,
                               ncclComm_t nc, MPI_Comm comm, cudaStream_t s) {
  const char *fn = nccl_case ? "nccl_sum" : "mpi_sum";
  const char *pname = ctx->perf_cases[pi].name;
  const long long n = b->n;
  float *want = want_alloc(ctx, (size_t)n * sizeof(float));
  float *host = host_alloc(ctx, (size_t)n * sizeof(float));
  long long last_wrong = 0, hits = 0;
  part_tally t;
  mgpu_result r;
  char tag[160];
  memset(&t, 0, sizeof t);
  mgpu_result_init(&r, n);
  snprintf(tag, sizeof tag, "%s/after-timing/last", pname);
  if (read_back(ctx, tag, &b->recv, host, n, s)) {
    host_sum(want, ctx, kTimedIter + pi, n, 1.0f);
    compare_part(&r, 0, host, want, NULL, n, &t);
    last_wrong = t.wrong;
  }

  if (mgpu_computes(ctx)) {
    mgpu_fill_fine_f32((float *)b->send.ptr, n, ctx->seed, ctx->rank, kAfterTimingIter + pi, s);
    mgpu_poison(&b->recv, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    yours_op(nccl_case, b, nc, comm, s);
    collective_watch(ctx, s, fn);
  }
  snprintf(tag, sizeof tag, "%s/after-timing/new", pname);
  if (read_back(ctx, tag, &b->recv, host, n, s)) {
    host_sum(want, ctx, kAfterTimingIter + pi, n, 1.0f);
    memset(&t, 0, sizeof t);
    compare_part(&r, n, host, want, NULL, n, &t);
  }
  snprintf(tag, sizeof tag, "%s/after-timing/guards", pname);
  if (hand_over_guards(ctx, tag, &b->send, &b->recv, NULL, &hits)) {
    r.guard_hits = hits;
    if (last_wrong)
      snprintf(r.msg, sizeof r.msg,
               "%s, perf case %s: after the timed calls, recv did not hold the sum of the inputs "
               "they were given (%lld of %lld floats wrong): every call must do the whole work, "
               "repeated calls with the same buffers included",
               fn, pname, last_wrong, n);
    else if (t.wrong)
      snprintf(r.msg, sizeof r.msg,
               "%s, perf case %s: after the timed calls, a call with new data in the same "
               "buffers gave a wrong result (%lld of %lld floats wrong, %lld NaN): every call "
               "must do the whole work, repeated calls with the same buffers included",
               fn, pname, t.wrong, n, t.nan);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg, "a write landed outside send or recv (in the guard bands)");
    {
      char name[96];
      snprintf(name, sizeof name, "timed-%s", pname);
      mgpu_record_case(name, &r, 0);
    }
  }
  host_free(ctx, host);
  free(want);
}

static void run_perf(mgpu_ctx *ctx, int pi, MPI_Comm comm, MPI_Comm base_comm, ncclComm_t nc,
                     int usable, cudaStream_t s) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const int nccl_case = strncmp(c->name, "nccl", 4) == 0;
  const long long n = c->n;
  const size_t bytes = (size_t)n * sizeof(float);
  const int min_reps = ctx->min_reps > 0 ? ctx->min_reps : 5;
  int max_reps = ctx->max_reps > 0 ? ctx->max_reps : 30;
  const double budget_us =
      (ctx->perf_budget_ms > 0 ? ctx->perf_budget_ms : 20000.0) * 1e3 / ctx->nperf_cases;
  double yours_us[kMaxSamples], base_us[kMaxSamples], start;
  perf_bufs b;
  int k, i, stop, iy, ib;
  char name[96];

  if (n < 1 || n > kMaxN) mgpu_fail("driver", "perf case", __FILE__, __LINE__, n, "perf case size out of range");
  if (nccl_case && !usable) return; /* the correctness stage has failed already */
  memset(&b, 0, sizeof b);
  b.n = n;
  if (!mgpu_computes(ctx)) { /* the verifier: the check after the timing only */
    check_after_timing(ctx, pi, nccl_case, &b, nc, comm, s);
    return;
  }
  if (max_reps > kMaxSamples) max_reps = kMaxSamples;
  b.send = mgpu_alloc(bytes, ctx->device);
  b.recv = mgpu_alloc(bytes, ctx->device);
  MGPU_CUDA(cudaMalloc((void **)&b.bsend, bytes));
  MGPU_CUDA(cudaMalloc((void **)&b.brecv, bytes));
  mgpu_fill_fine_f32((float *)b.send.ptr, n, ctx->seed, ctx->rank, kTimedIter + pi, s);
  mgpu_fill_fine_f32(b.bsend, n, ctx->seed, ctx->rank, kTimedIter + pi, s);
  MGPU_CUDA(cudaStreamSynchronize(s));

  /* Warm-up (NCCL's and MPI's first-use costs), then one timed operation of each decides how
   * many a sample takes, separately for each side. */
  for (i = 0; i < 2; i++) {
    sample(0, 1, nccl_case, &b, nc, comm, base_comm, s);
    sample(1, 1, nccl_case, &b, nc, comm, base_comm, s);
  }
  iy = iters_for(sample(0, 1, nccl_case, &b, nc, comm, base_comm, s));
  ib = iters_for(sample(1, 1, nccl_case, &b, nc, comm, base_comm, s));

  start = mgpu_now_us();
  for (k = 0, stop = 0; !stop; k++) {
    yours_us[k] = sample(0, iy, nccl_case, &b, nc, comm, base_comm, s);
    base_us[k] = sample(1, ib, nccl_case, &b, nc, comm, base_comm, s);
    stop = k + 1 >= max_reps || (k + 1 >= min_reps && mgpu_now_us() - start > budget_us);
    MGPU_MPI(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD));
  }
  mgpu_record_timing(c->name, "yours", (double)bytes, 1.0, "time", yours_us, yours_us, k);
  mgpu_record_timing(c->name, "baseline", (double)bytes, 1.0, "time", base_us, base_us, k);
  if (ctx->rank == 0) {
    snprintf(name, sizeof name, "%s: your %s, median", c->name, nccl_case ? "nccl_sum" : "mpi_sum");
    mgpu_value(name, median_of(yours_us, k), "us");
    snprintf(name, sizeof name, "%s: the course's MPI_Allreduce, median", c->name);
    mgpu_value(name, median_of(base_us, k), "us");
  }

  check_after_timing(ctx, pi, nccl_case, &b, nc, comm, s);

  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  MGPU_CUDA(cudaFree(b.brecv));
  MGPU_CUDA(cudaFree(b.bsend));
  mgpu_free(&b.recv);
  mgpu_free(&b.send);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  MPI_Comm comms[2] = {MPI_COMM_NULL, MPI_COMM_NULL}; /* the learner's, the baseline's */
  cudaStream_t stream = NULL;
  ncclComm_t nc = NULL;
  char problem[sizeof(((mgpu_result *)0)->msg)];
  int usable = 0, k;

  mgpu_init(&ctx, argc, argv); /* picks this rank's GPU before MPI_Init (none in the verifier) */
  memset(problem, 0, sizeof problem);
  if (mgpu_computes(&ctx)) {
    int all;
    start_mpi(&ctx, &argc, &argv, comms, 2);
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    nc = make_comm(&ctx, comms[0]);
    usable = comm_matches(nc, &ctx, problem, sizeof problem);
    /* NCCL work is collective: run it only if every rank's communicator is right. */
    all = usable;
    MGPU_MPI(MPI_Allreduce(&usable, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (usable && !all)
      snprintf(problem, sizeof problem,
               "another rank's NCCL communicator does not match MPI (its record says how), so "
               "no rank ran the NCCL parts");
    usable = all;
    if (!usable) mgpu_note("%s", problem);
  }
  /* Whether the NCCL parts run, and why not, is the rank's to see (NCCL's view of the
   * communicator); the verifier follows the same path. */
  mgpu_hand_over(&ctx, "comm/usable", &usable, sizeof usable);
  mgpu_hand_over(&ctx, "comm/problem", problem, sizeof problem);
  problem[sizeof problem - 1] = 0;

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, k, comms[0], nc, usable, problem, stream);
  if (ctx.perf)
    for (k = 0; k < ctx.nperf_cases; k++)
      run_perf(&ctx, k, comms[0], comms[1], nc, usable, stream);

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaDeviceSynchronize());
    if (nc != NULL) MGPU_NCCL(ncclCommDestroy(nc));
    MGPU_CUDA(cudaStreamDestroy(stream));
    MGPU_MPI(MPI_Comm_free(&comms[1]));
    MGPU_MPI(MPI_Comm_free(&comms[0]));
    MGPU_MPI(MPI_Finalize());
  }
  return mgpu_finish(&ctx);
}
