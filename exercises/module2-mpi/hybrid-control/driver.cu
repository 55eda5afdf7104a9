/*
 * driver.cu — module2/hybrid-control (course-owned).
 *
 * One process per GPU, started by mpirun. MPI for control, NCCL for data: the driver makes the
 * NCCL communicator itself (rank 0's unique id through MPI_Bcast, the way module2/mpi-vs-nccl
 * taught), with NCCL rank = MPI rank.
 *
 * The counts. Step t's count on rank r is decided by the produce kernel on the GPU from rank
 * r's own key (mgpu_exact_key(seed, r, count_iter)): on even steps it lies in [cap/2 + 1, cap], on odd steps in [0, cap/2] (all 1 and
 * all 0 when cap = 1). So the largest count of a step always differs from the step before:
 * a count that is one step stale is wrong at every step, and at every even step it is too
 * small, so data is lost, not only counted wrong.
 *
 * Correctness, per case (n = cap, floats per message), kSteps steps:
 *   - before each step, recv is poisoned (on the stream). hyb_produce queues a kDelayUs spin
 *     kernel before the kernel that writes the message and the count, so a count read before
 *     the stream has finished is the previous step's, every time; count_dev holds 0 before the
 *     first step.
 *   - after each step the driver waits for the stream (mgpu_wait_or_hang: an NCCL transfer whose
 *     two ends disagree never completes, and is reported as a hang at this rank); the returned
 *     counts are checked against the largest count of each step, computed on the host from the
 *     same formula and every rank's key.
 *   - MPI calls are watched: this driver defines MPI_Allreduce, MPI_Bcast, MPI_Send, ... as thin
 *     wrappers (the MPI profiling interface) that note any device or managed buffer before
 *     calling the library's PMPI_ function. In this exercise MPI carries no data: the wrappers
 *     also add up the bytes each step hands MPI to send, and more than control_bytes in one
 *     step (data staged through the host and sent by MPI instead of NCCL) fails the case.
 *     One-sided and neighbourhood MPI calls, which the wrappers do not see, are forbidden.
 *   - at the end, the running total (every received entry added up, kSteps steps) must equal
 *     the sum of the previous rank's messages truncated at each step's largest count, exactly
 *     (fine exact values, multiples of 1/64: exact in any order). When it does not, the driver tries every
 *     rank as the sender and says whose messages the total matches.
 *   - after each step, the entries of recv past the count the step returned must still hold
 *     the poison: NCCL moves exactly the agreed count (moving the whole cap gives the same
 *     totals, since entries past a count are zeros, and makes the agreement pointless).
 *   Guard bands around send, recv and the total must stay untouched.
 *
 * The checks are each rank's verifier's (`verifier: true`, docs/protocol.md §4), on the CPU.
 * Every input belongs to one rank and is made from that rank's key only: its messages (the
 * exact values of mgpu_exact_key(seed, rank, data_iter)) and its counts (step_count of
 * mgpu_exact_key(seed, rank, count_iter)). So a rank can make its own counts and messages, never
 * another rank's: the step's largest count and the neighbour's data reach it only through MPI
 * and NCCL. Per case the rank hands over what it measured ("<case>/facts": guard hits, the MPI
 * watch's hits in this case and its first note), the counts hybrid_step returned
 * ("<case>/returned", kSteps ints) and the running total as read back ("<case>/total", cap
 * floats); the verifier, which alone knows the seed, makes every rank's counts and messages,
 * compares and records the case. It makes no MPI, NCCL or CUDA call (no GPU, not one of
 * mpirun's processes). Without a verifier one process does both, as before.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <nccl.h>
#include <cuda_runtime.h>

#include "mgpu.h"
#include "hybrid-control.h"

enum { kSteps = 8, kThreads = 256, kMaxFirst = 4 };
static const double kDelayUs = 20000.0; /* hyb_produce's kernel starts this late */
static const double kStepWatchdogS = 30.0;

/* ---- MPI calls, watched -------------------------------------------------------------------- */

typedef struct mpi_watch {
  long long hits;
  char first[200];
  int in_step;           /* inside hybrid_step */
  long long step_bytes;  /* bytes handed to MPI to send in this step (control and anything else) */
  char step_first[120];  /* the call that carried the most of them */
  long long step_most;
} mpi_watch;
static mpi_watch g_watch;

/* MPI in this exercise carries a count: a few bytes per step. More than this in one step
 * (the agreement of an int costs 4 bytes; a gather of every rank's count 4 x world) is data
 * going by MPI instead of NCCL. */
static long long control_bytes(int world) { return 64 + 16LL * world; }

/* Bytes that a call hands MPI to send: count elements of datatype. */
static void carry(const char *fn, long long count, MPI_Datatype datatype) {
  int size = 0;
  long long b;
  if (!g_watch.in_step || count <= 0) return;
  if (datatype == MPI_DATATYPE_NULL || PMPI_Type_size(datatype, &size) != MPI_SUCCESS) return;
  b = count * (long long)size;
  g_watch.step_bytes += b;
  if (b > g_watch.step_most) {
    g_watch.step_most = b;
    snprintf(g_watch.step_first, sizeof g_watch.step_first, "%s (%lld bytes)", fn, b);
  }
}

static int device_memory(const void *p) {
  cudaPointerAttributes a;
  if (p == NULL || p == MPI_IN_PLACE || p == MPI_BOTTOM) return 0;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static void watch(const char *fn, const char *arg, const void *p) {
  if (!device_memory(p)) return;
  if (g_watch.hits++ == 0)
    snprintf(g_watch.first, sizeof g_watch.first, "%s was handed a device pointer as %s", fn, arg);
}

extern "C" {
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  carry("MPI_Allreduce", count, datatype);
  watch("MPI_Allreduce", "sendbuf", sendbuf);
  watch("MPI_Allreduce", "recvbuf", recvbuf);
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request) {
  carry("MPI_Iallreduce", count, datatype);
  watch("MPI_Iallreduce", "sendbuf", sendbuf);
  watch("MPI_Iallreduce", "recvbuf", recvbuf);
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  carry("MPI_Reduce", count, datatype);
  watch("MPI_Reduce", "sendbuf", sendbuf);
  watch("MPI_Reduce", "recvbuf", recvbuf);
  return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  carry("MPI_Bcast", count, datatype);
  watch("MPI_Bcast", "buffer", buffer);
  return PMPI_Bcast(buffer, count, datatype, root, comm);
}
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  carry("MPI_Allgather", sendcount, sendtype);
  watch("MPI_Allgather", "sendbuf", sendbuf);
  watch("MPI_Allgather", "recvbuf", recvbuf);
  return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  carry("MPI_Gather", sendcount, sendtype);
  watch("MPI_Gather", "sendbuf", sendbuf);
  watch("MPI_Gather", "recvbuf", recvbuf);
  return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  carry("MPI_Scatter", recvcount, recvtype);
  watch("MPI_Scatter", "sendbuf", sendbuf);
  watch("MPI_Scatter", "recvbuf", recvbuf);
  return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  carry("MPI_Alltoall", sendcount, sendtype);
  watch("MPI_Alltoall", "sendbuf", sendbuf);
  watch("MPI_Alltoall", "recvbuf", recvbuf);
  return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  carry("MPI_Send", count, datatype);
  watch("MPI_Send", "buf", buf);
  return PMPI_Send(buf, count, datatype, dest, tag, comm);
}
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
  watch("MPI_Recv", "buf", buf);
  return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request *request) {
  carry("MPI_Isend", count, datatype);
  watch("MPI_Isend", "buf", buf);
  return PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
}
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request) {
  watch("MPI_Irecv", "buf", buf);
  return PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
}
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status) {
  carry("MPI_Sendrecv", sendcount, sendtype);
  watch("MPI_Sendrecv", "sendbuf", sendbuf);
  watch("MPI_Sendrecv", "recvbuf", recvbuf);
  return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                       source, recvtag, comm, status);
}
int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  carry("MPI_Ssend", count, datatype);
  watch("MPI_Ssend", "buf", buf);
  return PMPI_Ssend(buf, count, datatype, dest, tag, comm);
}
int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  carry("MPI_Bsend", count, datatype);
  watch("MPI_Bsend", "buf", buf);
  return PMPI_Bsend(buf, count, datatype, dest, tag, comm);
}
int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  carry("MPI_Rsend", count, datatype);
  watch("MPI_Rsend", "buf", buf);
  return PMPI_Rsend(buf, count, datatype, dest, tag, comm);
}
int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request *request) {
  carry("MPI_Issend", count, datatype);
  watch("MPI_Issend", "buf", buf);
  return PMPI_Issend(buf, count, datatype, dest, tag, comm, request);
}
int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request *request) {
  carry("MPI_Send_init", count, datatype);
  watch("MPI_Send_init", "buf", buf);
  return PMPI_Send_init(buf, count, datatype, dest, tag, comm, request);
}
int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request *request) {
  watch("MPI_Recv_init", "buf", buf);
  return PMPI_Recv_init(buf, count, datatype, source, tag, comm, request);
}
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  carry("MPI_Sendrecv_replace", count, datatype);
  watch("MPI_Sendrecv_replace", "buf", buf);
  return PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status);
}
int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *request) {
  carry("MPI_Ibcast", count, datatype);
  watch("MPI_Ibcast", "buffer", buffer);
  return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
}
int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request) {
  carry("MPI_Ireduce", count, datatype);
  watch("MPI_Ireduce", "sendbuf", sendbuf);
  watch("MPI_Ireduce", "recvbuf", recvbuf);
  return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
}
int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
  carry("MPI_Iallgather", sendcount, sendtype);
  watch("MPI_Iallgather", "sendbuf", sendbuf);
  watch("MPI_Iallgather", "recvbuf", recvbuf);
  return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}
int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  carry("MPI_Allgatherv", sendcount, sendtype);
  watch("MPI_Allgatherv", "sendbuf", sendbuf);
  watch("MPI_Allgatherv", "recvbuf", recvbuf);
  return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}
int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  int size = 0, i;
  long long total = 0;
  if (sendbuf != MPI_IN_PLACE && PMPI_Comm_size(comm, &size) == MPI_SUCCESS)
    for (i = 0; i < size; i++) total += sendcounts[i];
  carry("MPI_Alltoallv", total, sendtype);
  watch("MPI_Alltoallv", "sendbuf", sendbuf);
  watch("MPI_Alltoallv", "recvbuf", recvbuf);
  return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                        recvtype, comm);
}
int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm) {
  carry("MPI_Scan", count, datatype);
  watch("MPI_Scan", "sendbuf", sendbuf);
  watch("MPI_Scan", "recvbuf", recvbuf);
  return PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm);
}
int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm) {
  carry("MPI_Exscan", count, datatype);
  watch("MPI_Exscan", "sendbuf", sendbuf);
  watch("MPI_Exscan", "recvbuf", recvbuf);
  return PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm);
}
int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  carry("MPI_Reduce_scatter_block", recvcount, datatype);
  watch("MPI_Reduce_scatter_block", "sendbuf", sendbuf);
  watch("MPI_Reduce_scatter_block", "recvbuf", recvbuf);
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}
} /* extern "C" */

/* ---- data ---------------------------------------------------------------------------------- */

__host__ __device__ static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Step t's count on rank r, from rank r's own count key: even steps in [cap/2 + 1, cap], odd
 * steps in [0, cap/2]. */
__host__ __device__ static inline int step_count(uint64_t key, int rank, int step, int cap) {
  const uint64_t h = mix64(key ^ mix64(((uint64_t)(uint32_t)rank << 32) | (uint32_t)step));
  const int lo = step % 2 == 0 ? cap / 2 + 1 : 0;
  const int hi = step % 2 == 0 ? cap : cap / 2;
  return lo + (int)(h % (uint64_t)(hi - lo + 1));
}

static int data_iter(int c, int step) { return 1000 + c * 64 + step; }
/* The counts of case c on rank r come from mgpu_exact_key(seed, r, count_iter(c)): the rank's
 * own key, unlike any data_iter (steps are 0 .. kSteps - 1 < 63). */
static int count_iter(int c) { return 1000 + c * 64 + 63; }

/* Rank r's count key of case c. A split rank can ask for its own only. */
static uint64_t count_key(const mgpu_ctx *ctx, int r, int c) {
  return mgpu_exact_key(ctx->seed, r, count_iter(c));
}

struct hyb_private {
  uint64_t ckey;                /* this rank's key of the counts */
  uint64_t seed;                /* the run's seed (0 in a split rank, whose own keys the harness
                                 * holds): the messages are this rank's exact values */
  int iter[kSteps];             /* the exact generator's iteration of each step's message */
  float *total;                 /* device, cap floats: what hyb_consume adds up */
  unsigned long long delay_ns;  /* hyb_produce's kernel waits this long first */
};

/* The step's count, decided here on the GPU, and the message cut at it: entries from count on
 * become 0. One thread writes the count to count_dev. */
__global__ void count_kernel(float *send, int *count_dev, int cap, uint64_t ckey, int rank,
                             int step) {
  const int count = step_count(ckey, rank, step, cap);
  for (long long i = count + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < cap;
       i += (long long)gridDim.x * blockDim.x)
    send[i] = 0.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0) *count_dev = count;
}

__global__ void consume_kernel(float *total, const float *recv, int count) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    total[i] += recv[i];
}

static unsigned grid_for(long long n) {
  long long b = (n + kThreads - 1) / kThreads;
  if (b > 4096) b = 4096;
  return (unsigned)(b > 0 ? b : 1);
}

extern "C" void hyb_produce(const hyb_state *h, int step, cudaStream_t stream) {
  if (step < 0 || step >= kSteps)
    mgpu_fail("learner", "hyb_produce", __FILE__, __LINE__, step, "step out of range");
  if (h->priv->delay_ns) mgpu_delay(stream, h->priv->delay_ns);
  /* The message: this rank's exact values of the step (the harness's generator), ... */
  mgpu_fill_fine_f32(h->send, h->cap, h->priv->seed, h->rank, h->priv->iter[step], stream);
  /* ... cut at the count the GPU decides. */
  count_kernel<<<grid_for(h->cap), kThreads, 0, stream>>>(h->send, h->count_dev, h->cap,
                                                          h->priv->ckey, h->rank, step);
  MGPU_KERNEL();
}

extern "C" void hyb_consume(const hyb_state *h, int count, cudaStream_t stream) {
  if (count < 0 || count > h->cap) {
    char msg[160];
    snprintf(msg, sizeof msg, "count %d is outside 0 .. cap = %d: no message is longer than cap",
             count, h->cap);
    mgpu_fail("learner", "hyb_consume", __FILE__, __LINE__, count, msg);
  }
  if (count == 0) return;
  consume_kernel<<<grid_for(count), kThreads, 0, stream>>>(h->priv->total, h->recv, count);
  MGPU_KERNEL();
}

/* The running total if every step t had brought rank `from`'s message cut at agreed[t]. Where
 * the checks are made (it needs rank `from`'s keys). */
static void expected_total(double *want, const mgpu_ctx *ctx, int ci, int from, int cap,
                           const int *agreed) {
  const uint64_t ckey = count_key(ctx, from, ci);
  int t;
  long long i;
  for (i = 0; i < cap; i++) want[i] = 0.0;
  for (t = 0; t < kSteps; t++) {
    const int cnt = step_count(ckey, from, t, cap);
    const int upto = cnt < agreed[t] ? cnt : agreed[t];
    const uint64_t key = mgpu_exact_key(ctx->seed, from, data_iter(ci, t));
    for (i = 0; i < upto; i++) want[i] += mgpu_fine_value_k(key, i);
  }
}

/* ---- correctness --------------------------------------------------------------------------- */

/* What the rank measured in a case, handed over as "<case>/facts". */
typedef struct case_facts {
  long long guard_hits; /* writes outside send, recv, the total and count_dev */
  long long mpi_hits;   /* device or managed buffers handed to MPI in this case */
  char mpi_first[200];  /* the watch's first note (of the run) */
  long long mpi_step_bytes; /* the most bytes MPI was handed to send in one step of this case */
  int mpi_step;             /* that step */
  char mpi_step_call[120];  /* its largest call */
  long long over_written;   /* entries of recv past the returned count written in a step */
  int over_step;            /* the first such step */
  int over_count;           /* the count it returned */
  int mpi_quiet_step;       /* the first step that handed MPI nothing to send (-1: none) */
} case_facts;

/* The rank: runs kSteps steps of the learner's hybrid_step and reads back what the verifier
 * checks: the counts it returned, the running total, the guard and MPI-watch hits. */
static void compute_case(mgpu_ctx *ctx, int ci, MPI_Comm comm, ncclComm_t nc, cudaStream_t s,
                         int *returned, float *got, case_facts *f) {
  const mgpu_case *c = &ctx->cases[ci];
  const int cap = (int)c->n;
  const size_t bytes = (size_t)cap * sizeof(float);
  hyb_private priv;
  hyb_state h;
  mgpu_buf send, recv, total, count;
  long long hits_before = g_watch.hits;
  unsigned char *scratch;
  char hint[256];
  int t;
  (void)comm; /* the learner's */
  (void)nc;

  f->mpi_quiet_step = -1;
  memset(&priv, 0, sizeof priv);
  priv.ckey = count_key(ctx, ctx->rank, ci);
  priv.seed = ctx->seed;
  for (t = 0; t < kSteps; t++) priv.iter[t] = data_iter(ci, t);
  priv.delay_ns = (unsigned long long)(kDelayUs * 1000.0);
  send = mgpu_alloc(bytes, ctx->device);
  recv = mgpu_alloc(bytes, ctx->device);
  total = mgpu_alloc(bytes, ctx->device);
  count = mgpu_alloc(sizeof(int), ctx->device);
  MGPU_CUDA(cudaMemsetAsync(total.ptr, 0, bytes, s));
  MGPU_CUDA(cudaMemsetAsync(count.ptr, 0, sizeof(int), s));
  priv.total = (float *)total.ptr;
  memset(&h, 0, sizeof h);
  h.rank = ctx->rank;
  h.world = ctx->world;
  h.cap = cap;
  h.send = (float *)send.ptr;
  h.recv = (float *)recv.ptr;
  h.count_dev = (int *)count.ptr;
  h.priv = &priv;
  scratch = (unsigned char *)malloc(bytes);
  if (!scratch) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  MGPU_CUDA(cudaStreamSynchronize(s));

  snprintf(hint, sizeof hint,
           "the NCCL transfer of this step never completed: do both ends of every ncclSend and "
           "ncclRecv agree on the peer and on the count (the same agreed count on every rank)?");
  for (t = 0; t < kSteps; t++) {
    mgpu_poison(&recv, s);
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    returned[t] = 0;
    g_watch.in_step = 1;
    g_watch.step_bytes = 0;
    g_watch.step_most = 0;
    g_watch.step_first[0] = 0;
    MGPU_LEARNER(returned[t] = hybrid_step(&h, t, s, comm, nc));
    g_watch.in_step = 0;
    if (g_watch.step_bytes == 0 && f->mpi_quiet_step < 0) f->mpi_quiet_step = t;
    if (g_watch.step_bytes > f->mpi_step_bytes) {
      f->mpi_step_bytes = g_watch.step_bytes;
      f->mpi_step = t;
      snprintf(f->mpi_step_call, sizeof f->mpi_step_call, "%s", g_watch.step_first);
    }
    mgpu_wait_or_hang(ctx, s, kStepWatchdogS, "hybrid_step", hint);
    /* recv was poisoned before the step: past the count the step returned, nothing may have
     * arrived. Moving more than the agreed count (the whole cap, every step) gives the same
     * totals, since the entries past a count are zeros, and makes the agreement pointless. */
    if (returned[t] >= 0 && returned[t] < cap) {
      const size_t from = (size_t)returned[t] * sizeof(float);
      size_t b;
      long long written = 0;
      MGPU_CUDA(cudaMemcpy(scratch, (const char *)recv.ptr + from, bytes - from,
                           cudaMemcpyDeviceToHost));
      for (b = 0; b < bytes - from; b++) written += scratch[b] != 0xFF;
      if (written && !f->over_written) {
        f->over_step = t;
        f->over_count = returned[t];
      }
      f->over_written += written;
    }
  }

  MGPU_CUDA(cudaMemcpy(got, total.ptr, bytes, cudaMemcpyDeviceToHost));
  f->guard_hits = mgpu_guard_hits(&send) + mgpu_guard_hits(&recv) + mgpu_guard_hits(&total) +
                  mgpu_guard_hits(&count);
  f->mpi_hits = g_watch.hits - hits_before;
  snprintf(f->mpi_first, sizeof f->mpi_first, "%s", g_watch.first);

  free(scratch);
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  mgpu_free(&count);
  mgpu_free(&total);
  mgpu_free(&recv);
  mgpu_free(&send);
}

/* The verifier (or a run without one): every rank's counts and the left neighbour's messages
 * from the seed, compared with what the rank handed over. */
static void check_case(mgpu_ctx *ctx, int ci, const int *returned, const float *got,
                       case_facts *f) {
  const mgpu_case *c = &ctx->cases[ci];
  const int cap = (int)c->n;
  const int left = (ctx->rank - 1 + ctx->world) % ctx->world;
  const uint64_t own_ckey = count_key(ctx, ctx->rank, ci);
  int true_max[kSteps], bad_steps = 0, first_bad = -1, t, r;
  long long i;
  double *want;
  mgpu_result res;

  f->mpi_first[sizeof f->mpi_first - 1] = 0; /* a string from the rank's process */
  f->mpi_step_call[sizeof f->mpi_step_call - 1] = 0;
  for (t = 0; t < kSteps; t++) {
    true_max[t] = 0;
    for (r = 0; r < ctx->world; r++) {
      const int k = step_count(count_key(ctx, r, ci), r, t, cap);
      if (k > true_max[t]) true_max[t] = k;
    }
    if (returned[t] != true_max[t]) {
      bad_steps++;
      if (first_bad < 0) first_bad = t;
    }
  }

  /* The running total, compared with the previous rank's messages cut at the true counts. */
  want = (double *)malloc((size_t)cap * sizeof(double));
  if (!want) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  expected_total(want, ctx, ci, left, cap, true_max);
  mgpu_result_init(&res, c->n);
  for (i = 0; i < cap; i++) mgpu_result_add(&res, i, got[i], want[i], 0.0);
  res.guard_hits = f->guard_hits;

  if (f->mpi_hits > 0) {
    snprintf(res.msg, sizeof res.msg,
             "%s (%lld time(s) in this case). In this exercise MPI carries only control values "
             "in host memory: copy the count into a host int once the stream has finished, and "
             "let NCCL move the data.",
             f->mpi_first[0] ? f->mpi_first : "MPI was handed a device pointer", f->mpi_hits);
    mgpu_record_case(c->name, &res, 1);
  } else if (f->mpi_step_bytes > control_bytes(ctx->world)) {
    snprintf(res.msg, sizeof res.msg,
             "in step %d MPI was handed %lld bytes to send, the largest call %s: far more than "
             "a count. In this exercise MPI carries only the count (one int per rank); the "
             "messages go round the ring by NCCL (ncclSend/ncclRecv of h->send and h->recv on "
             "the stream), not by MPI through host copies.",
             f->mpi_step, f->mpi_step_bytes, f->mpi_step_call[0] ? f->mpi_step_call : "(unknown)");
    mgpu_record_case(c->name, &res, 1);
  } else if (ctx->world > 1 && f->mpi_quiet_step >= 0) {
    snprintf(res.msg, sizeof res.msg,
             "in step %d MPI was handed nothing to send, yet the ranks agreed on a count: the "
             "agreement went some other way (ncclSend/ncclRecv of the counts, memory of the "
             "peers). In this exercise MPI carries the control: copy the count to a host int once "
             "the stream has finished and agree on the largest with MPI_Allreduce (MPI_MAX).",
             f->mpi_quiet_step);
    mgpu_record_case(c->name, &res, 1);
  } else if (bad_steps) {
    /* One step stale: step t agreed on step t-1's largest count (step 0 on the 0 that
     * count_dev held before the first step). */
    int stale = 0, ts = -1, tb = first_bad, zeros = 0;
    for (t = 0; t < kSteps; t++) {
      zeros += returned[t] == 0;
      if (returned[t] != true_max[t] && returned[t] == (t == 0 ? 0 : true_max[t - 1])) {
        stale++;
        if (ts < 1) ts = t;
      }
    }
    if (zeros == kSteps)
      snprintf(res.msg, sizeof res.msg,
               "hybrid_step returned 0 at every step: no count was agreed, so nothing moved "
               "(step %d's largest count is %d). Get this rank's count from count_dev to the "
               "host, agree on the maximum with MPI_Allreduce, then move that many floats with "
               "NCCL.",
               tb, true_max[tb]);
    else if (stale * 2 >= bad_steps && ts >= 0)
      snprintf(res.msg, sizeof res.msg,
               "%d of %d steps agreed on a wrong count, %d of them on the count of the step before "
               "(step %d returned %d; its largest count is %d). The count was read from count_dev "
               "before this step's hyb_produce kernel had written it: read it after hyb_produce, "
               "and only once `stream` has finished (cudaMemcpyAsync on the stream, then "
               "cudaStreamSynchronize; a plain cudaMemcpy does not wait for a non-blocking "
               "stream).",
               bad_steps, kSteps, stale, ts, returned[ts], true_max[ts]);
    else if (returned[tb] == step_count(own_ckey, ctx->rank, tb, cap) && ctx->world > 1)
      snprintf(res.msg, sizeof res.msg,
               "%d of %d steps returned a wrong count. Step %d returned %d, this rank's own "
               "count; the ranks must agree on the largest count of all ranks, %d "
               "(MPI_Allreduce with MPI_MAX on a host int).",
               bad_steps, kSteps, tb, returned[tb], true_max[tb]);
    else
      snprintf(res.msg, sizeof res.msg,
               "%d of %d steps returned a wrong count. Step %d returned %d; the largest count "
               "any rank's hyb_produce computed for it is %d (this rank's: %d). Agree on the "
               "maximum with MPI_Allreduce (MPI_MAX) of the count copied to the host.",
               bad_steps, kSteps, tb, returned[tb], true_max[tb],
               step_count(own_ckey, ctx->rank, tb, cap));
    mgpu_record_case(c->name, &res, 1);
  } else {
    int force = 0;
    if (res.bad || res.unwritten) {
      int from = -1;
      for (r = 0; r < ctx->world && from < 0; r++) {
        long long same = 0;
        if (r == left) continue;
        expected_total(want, ctx, ci, r, cap, true_max);
        for (i = 0; i < cap; i++) same += got[i] == (float)want[i];
        if (same == cap) from = r;
      }
      if (from >= 0)
        snprintf(res.msg, sizeof res.msg,
                 "rank %d's total is made of rank %d's messages, but its left neighbour is rank "
                 "%d: every rank sends to (rank + 1) %% world and receives from (rank - 1 + "
                 "world) %% world, on any number of ranks (here %d).",
                 ctx->rank, from, left, ctx->world);
      else
        snprintf(res.msg, sizeof res.msg,
                 "the counts were right, but the %d-step total differs from the messages of the "
                 "left neighbour (rank %d): is each message received into h->recv from that "
                 "neighbour, with the agreed count, and consumed after it arrived (same "
                 "stream)?",
                 kSteps, left);
    } else if (f->over_written) {
      force = 1;
      snprintf(res.msg, sizeof res.msg,
               "the counts and the total are right, but %lld entries of recv past the agreed "
               "count were written (first in step %d, whose count was %d; recv is poisoned "
               "before every step): NCCL moved more than the count the ranks agreed on. Send "
               "and receive exactly `agreed` floats: that is what the agreement is for.",
               f->over_written, f->over_step, f->over_count);
    } else if (res.guard_hits)
      snprintf(res.msg, sizeof res.msg,
               "a write landed outside send, recv, the total or count_dev (in the guard bands)");
    mgpu_record_case(c->name, &res, force);
  }
  free(want);
}

/* One case: the rank computes and hands over ("<case>/facts", "<case>/returned",
 * "<case>/total"); where the checks are made, they are made. */
static void run_case(mgpu_ctx *ctx, int ci, MPI_Comm comm, ncclComm_t nc, cudaStream_t s) {
  const mgpu_case *c = &ctx->cases[ci];
  int returned[kSteps];
  case_facts f;
  float *got;
  char tag[160];

  if (c->n < 1 || c->n > (1 << 26))
    mgpu_fail("driver", "case", __FILE__, __LINE__, c->n, "case size out of range");
  memset(returned, 0, sizeof returned);
  memset(&f, 0, sizeof f);
  got = (float *)malloc((size_t)c->n * sizeof(float));
  if (!got) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  if (mgpu_computes(ctx)) compute_case(ctx, ci, comm, nc, s, returned, got, &f);
  snprintf(tag, sizeof tag, "%s/facts", c->name);
  mgpu_hand_over(ctx, tag, &f, sizeof f);
  snprintf(tag, sizeof tag, "%s/returned", c->name);
  mgpu_hand_over(ctx, tag, returned, sizeof returned);
  snprintf(tag, sizeof tag, "%s/total", c->name);
  if (mgpu_hand_over(ctx, tag, got, (size_t)c->n * sizeof(float)))
    check_case(ctx, ci, returned, got, &f);
  free(got);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  MPI_Comm comm = MPI_COMM_NULL;
  cudaStream_t stream = NULL;
  ncclUniqueId id;
  ncclComm_t nc = NULL;
  int rank, world, k;

  mgpu_init(&ctx, argc, argv); /* picks this rank's GPU before MPI_Init (none in the verifier) */
  if (mgpu_computes(&ctx)) {
    MGPU_MPI(MPI_Init(&argc, &argv));
    mgpu_mpi_errors_return();
    MGPU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MGPU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world));
    if (rank != ctx.rank || world != ctx.world)
      mgpu_fail("harness", "MPI_Comm_rank", __FILE__, __LINE__, rank,
                "MPI's rank or size differs from the launcher's environment");
    MGPU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MGPU_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    memset(&id, 0, sizeof id);
    if (ctx.rank == 0) MGPU_NCCL(ncclGetUniqueId(&id));
    MGPU_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    MGPU_NCCL(ncclCommInitRank(&nc, ctx.world, id, ctx.rank));
  }

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, k, comm, nc, stream);

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaDeviceSynchronize());
    MGPU_NCCL(ncclCommDestroy(nc));
    MGPU_CUDA(cudaStreamDestroy(stream));
    MGPU_MPI(MPI_Comm_free(&comm));
    MGPU_MPI(MPI_Finalize());
  }
  return mgpu_finish(&ctx);
}
