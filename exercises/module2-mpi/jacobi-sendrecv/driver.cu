/*
 * driver.cu — module2/jacobi-sendrecv (course-owned).
 *
 * One process per GPU, started by mpirun with a CUDA-aware MPI. mgpu_init picks this rank's GPU
 * before MPI_Init; the driver refuses to go on when MPIX_Query_cuda_support() says the MPI
 * takes no device pointers (the learner's MPI_Sendrecv on device rows would crash it). NCCL is
 * initialized as well, for the baseline only.
 *
 * Correctness, per case (n = global interior rows, raised to the rank count when smaller so
 * that every rank owns at least one row; kCorrectNx = 1031 columns, a prime). The data are
 * integers in [0, 65521) and the update rule is exact (jacobi-sendrecv.h says why), so results
 * are compared with tolerance 0.
 *   1. Two slabs per rank (mgpu_alloc: guard bands around each, NaN poison inside). slab[0]
 *      gets this rank's rows; the fixed boundary rows go into both slabs on the first and last
 *      rank; every halo row between ranks stays NaN: it must be received before it is read.
 *   2. kCalls calls of jacobi_run, kItersPerCall iterations each. Before call j, the ranks
 *      whose (rank + j) is odd queue a kDelayUs spin on their stream first. Code that hands
 *      rows to MPI before the stream has computed them sends stale rows from those ranks,
 *      every time.
 *   3. The stream is synchronized, all ranks meet, and each rank compares its rows with a
 *      single-GPU reference of the whole grid that it computes on its own GPU (the course's
 *      stencil, same rule), every element. The fixed boundary rows of both slabs must be
 *      unchanged, the unused rows of a shorter slab still NaN poison, the guard bands intact.
 *
 * Performance (headline "1Mx16"; n = rows PER RANK, so every rank has the same work on any rank
 * count; kPerfNx = 2^20 columns, so each halo row is 4 MiB): time per iteration of yours against
 * the same iteration with the halos moved by NCCL (ncclGroupStart, ncclSend/ncclRecv of the
 * edge rows with both neighbours, ncclGroupEnd, then the stencil; all queued on the stream,
 * no host synchronization), in the same run, alternating (ABAB). The rows are wide so that the
 * exchange is a real share of the iteration: staging 4 MiB rows through the host costs far
 * more than the stencil.
 *
 * The timing is the driver's own, not mgpu_time_pair: the learner's MPI calls block the host
 * and wait for the stream, which a gate kernel would hold back. Every sample: all ranks meet
 * (MPI_Barrier), then `iters` iterations back to back, timed with the host clock to the end of
 * a cudaStreamSynchronize (the baseline also with CUDA events); the maximum over ranks is
 * recorded (MPI_Allreduce), so every rank records the same series. Afterwards both timed runs
 * are checked against the reference for the iterations each did: yours as case
 * "timed-<perf case>", the baseline as a driver self-check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "jacobi-sendrecv.h"

enum { kCorrectNx = 1031, kPerfNx = 1 << 20, kCalls = 4, kItersPerCall = 15, kMaxSamples = 200 };
static const double kDelayUs = 5000.0;  /* the late start of some ranks before each call */
static const double kSampleUs = 3000.0; /* a timing sample lasts at least this long */

/* ---- data ---------------------------------------------------------------------------------- */

__host__ __device__ static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t data_key(const mgpu_ctx *ctx, int which) {
  return mix64(ctx->seed ^ (0x4A41434F4249ull + 0x100000001B3ull * (uint64_t)which));
}

/* The initial value of global row grow, column col: an integer in [0, 65521). */
__host__ __device__ static inline float init_value(uint64_t key, long long grow, int col) {
  const uint64_t h = mix64(key ^ mix64((uint64_t)grow * 0x100000001B3ull + (uint64_t)col));
  return (float)(h % 65521ull);
}

/* dst rows 0 .. nrows-1 = global rows grow0 .. grow0+nrows-1. */
__global__ void init_rows(float *dst, int nx, long long grow0, int nrows, uint64_t key) {
  const long long n = (long long)nrows * nx;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    dst[i] = init_value(key, grow0 + i / nx, (int)(i % nx));
}

static void launch_init(float *dst, int nx, long long grow0, int nrows, uint64_t key,
                        cudaStream_t s) {
  const long long n = (long long)nrows * nx;
  long long blocks = (n + 255) / 256;
  if (nrows < 1) return;
  if (blocks > 8192) blocks = 8192;
  init_rows<<<(unsigned)blocks, 256, 0, s>>>(dst, nx, grow0, nrows, key);
  MGPU_KERNEL();
}

/* ---- layout -------------------------------------------------------------------------------- */

typedef struct layout {
  int rank, world, nx, ny, rows, row0, max_rows;
  int up, down; /* neighbour ranks, -1 at the grid's edge */
} layout;

static layout make_layout(const mgpu_ctx *ctx, int nx, int ny) {
  layout l;
  l.rank = ctx->rank;
  l.world = ctx->world;
  l.nx = nx;
  l.ny = ny;
  l.rows = jac_rows_of(ctx->rank, ctx->world, ny);
  l.row0 = jac_row0_of(ctx->rank, ctx->world, ny);
  l.max_rows = jac_rows_of(0, ctx->world, ny);
  l.up = ctx->rank > 0 ? ctx->rank - 1 : -1;
  l.down = ctx->rank < ctx->world - 1 ? ctx->rank + 1 : -1;
  return l;
}

static size_t slab_elems(const layout *l) { return (size_t)(l->max_rows + 2) * (size_t)l->nx; }

/* slab[0]: this rank's rows; both slabs: the fixed boundary rows where this rank has them. */
static void fill_slabs(float *slab[2], const layout *l, uint64_t key, cudaStream_t s) {
  int b;
  launch_init(slab[0] + l->nx, l->nx, l->row0, l->rows, key, s);
  for (b = 0; b < 2; b++) {
    if (l->up < 0) launch_init(slab[b], l->nx, 0, 1, key, s);
    if (l->down < 0) launch_init(slab[b] + (size_t)(l->rows + 1) * l->nx, l->nx, l->ny + 1, 1, key, s);
  }
}

/* ---- MPI ----------------------------------------------------------------------------------- */

static int mpi_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support();
#else
  return -1;
#endif
}

static void start_mpi(mgpu_ctx *ctx, int *argc, char ***argv, MPI_Comm *learner) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING + 1], msg[600], *cut;
  int rank, world, len = 0, aware;
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
  if ((cut = strchr(version, '\n')) != NULL) *cut = 0;
  if ((cut = strchr(version, ',')) != NULL) *cut = 0;
  aware = mpi_cuda_aware();
  if (aware == 0) {
    snprintf(msg, sizeof msg,
             "%s is not CUDA-aware: MPIX_Query_cuda_support() returned 0, so device rows passed "
             "to MPI_Sendrecv would crash it. Nothing was run. Use a CUDA-aware MPI "
             "(`mgpu-learn doctor` shows which MPI the course found)",
             version);
    mgpu_fail("harness", "MPIX_Query_cuda_support", __FILE__, __LINE__, 0, msg);
  }
  if (ctx->rank == 0)
    mgpu_note("MPI: %s; MPIX_Query_cuda_support() = %s", version,
              aware == 1 ? "1 (CUDA-aware)" : "not available (this MPI cannot say; assumed aware)");
  MGPU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, learner));
  MGPU_MPI(MPI_Comm_set_errhandler(*learner, MPI_ERRORS_RETURN));
}

static double max_over_ranks(double v) {
  double out = v;
  MGPU_MPI(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

/* ---- the single-GPU reference -------------------------------------------------------------- */

typedef struct reference {
  float *g[2]; /* (ny + 2) x nx each, boundary rows in both */
  long long iter;
  int nx, ny;
} reference;

static void ref_init(reference *ref, const layout *l, uint64_t key, cudaStream_t s) {
  const size_t n = (size_t)(l->ny + 2) * l->nx;
  int b;
  ref->nx = l->nx;
  ref->ny = l->ny;
  ref->iter = 0;
  for (b = 0; b < 2; b++) {
    MGPU_CUDA(cudaMalloc((void **)&ref->g[b], n * sizeof(float)));
    launch_init(ref->g[b], l->nx, 0, l->ny + 2, key, s);
  }
}

static void ref_advance(reference *ref, long long to_iter, cudaStream_t s) {
  for (; ref->iter < to_iter; ref->iter++)
    jac_stencil(ref->g[ref->iter & 1], ref->g[(ref->iter + 1) & 1], ref->nx, ref->ny, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
}

static void ref_free(reference *ref) {
  MGPU_CUDA(cudaFree(ref->g[1]));
  MGPU_CUDA(cudaFree(ref->g[0]));
}

/* ---- checks -------------------------------------------------------------------------------- */

typedef struct findings {
  long long edge, inner;  /* wrong owned elements: in the first/last row, or further in */
  long long boundary;     /* changed elements of the fixed boundary rows */
  long long unused;       /* written elements of the unused rows of a shorter slab */
} findings;

static int is_poison_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u == 0xFFFFFFFFu;
}

/* Compares rows 1 .. rows of `got` with the reference's current grid, element index = global
 * row x nx + column; counts where the wrong ones are. */
static void compare_rows(const float *got, const reference *ref, const layout *l, mgpu_result *r,
                         findings *f) {
  const size_t n = (size_t)l->rows * l->nx;
  float *hg, *hw;
  size_t i;
  MGPU_CUDA(cudaMallocHost((void **)&hg, n * sizeof(float)));
  MGPU_CUDA(cudaMallocHost((void **)&hw, n * sizeof(float)));
  MGPU_CUDA(cudaMemcpy(hg, got + l->nx, n * sizeof(float), cudaMemcpyDeviceToHost));
  MGPU_CUDA(cudaMemcpy(hw, ref->g[ref->iter & 1] + (size_t)l->row0 * l->nx, n * sizeof(float),
                       cudaMemcpyDeviceToHost));
  for (i = 0; i < n; i++) {
    const long long lr = (long long)(i / (size_t)l->nx) + 1;
    const long long before = r->bad + r->unwritten;
    mgpu_result_add(r, (long long)l->row0 * l->nx + (long long)i, hg[i], hw[i], 0.0);
    if (r->bad + r->unwritten != before) {
      if (lr == 1 || lr == l->rows) f->edge++;
      else f->inner++;
    }
  }
  MGPU_CUDA(cudaFreeHost(hw));
  MGPU_CUDA(cudaFreeHost(hg));
}

/* The fixed boundary rows (where this rank has them) and the unused rows of both slabs. */
static void check_frame(float *const slab[2], const layout *l, uint64_t key, findings *f) {
  const size_t nx = (size_t)l->nx, unused = (size_t)(l->max_rows - l->rows) * nx;
  float *h = (float *)malloc((nx > unused ? nx : unused) * sizeof(float));
  size_t i;
  int b;
  if (!h) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
  for (b = 0; b < 2; b++) {
    if (l->up < 0) {
      MGPU_CUDA(cudaMemcpy(h, slab[b], nx * sizeof(float), cudaMemcpyDeviceToHost));
      for (i = 0; i < nx; i++) f->boundary += h[i] != init_value(key, 0, (int)i);
    }
    if (l->down < 0) {
      MGPU_CUDA(cudaMemcpy(h, slab[b] + (size_t)(l->rows + 1) * nx, nx * sizeof(float),
                           cudaMemcpyDeviceToHost));
      for (i = 0; i < nx; i++) f->boundary += h[i] != init_value(key, l->ny + 1, (int)i);
    }
    if (unused) {
      MGPU_CUDA(cudaMemcpy(h, slab[b] + (size_t)(l->rows + 2) * nx, unused * sizeof(float),
                           cudaMemcpyDeviceToHost));
      for (i = 0; i < unused; i++) f->unused += !is_poison_bits(h[i]);
    }
  }
  free(h);
}

/* ---- correctness --------------------------------------------------------------------------- */

static jac_grid make_grid(const layout *l, float *slab0, float *slab1, MPI_Comm comm) {
  jac_grid g;
  memset(&g, 0, sizeof g);
  g.comm = comm;
  g.rank = l->rank;
  g.world = l->world;
  g.nx = l->nx;
  g.ny = l->ny;
  g.rows = l->rows;
  g.row0 = l->row0;
  g.max_rows = l->max_rows;
  g.slab[0] = slab0;
  g.slab[1] = slab1;
  return g;
}

static void run_case(const mgpu_ctx *ctx, int ci, MPI_Comm comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->cases[ci];
  const int ny = c->n < ctx->world ? ctx->world : (int)(c->n > 100000 ? 100000 : c->n);
  const layout l = make_layout(ctx, kCorrectNx, ny);
  const uint64_t key = data_key(ctx, ci);
  const long long iters = (long long)kCalls * kItersPerCall;
  mgpu_buf b[2];
  float *slab[2];
  jac_grid g;
  reference ref;
  mgpu_result r;
  findings f;
  int j;

  if (c->n > 100000) mgpu_fail("driver", "case", __FILE__, __LINE__, c->n, "more than 100000 rows");
  for (j = 0; j < 2; j++) {
    b[j] = mgpu_alloc(slab_elems(&l) * sizeof(float), ctx->device);
    slab[j] = (float *)b[j].ptr;
  }
  fill_slabs(slab, &l, key, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  g = make_grid(&l, slab[0], slab[1], comm);
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  for (j = 0; j < kCalls; j++) {
    if ((l.rank + j) % 2 == 1) mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
    jacobi_run(&g, (long long)j * kItersPerCall, kItersPerCall, s);
  }
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));

  ref_init(&ref, &l, key, s);
  ref_advance(&ref, iters, s);
  mgpu_result_init(&r, (long long)l.rows * l.nx);
  memset(&f, 0, sizeof f);
  compare_rows(slab[iters & 1], &ref, &l, &r, &f);
  check_frame(slab, &l, key, &f);
  r.guard_hits = mgpu_guard_hits(&b[0]) + mgpu_guard_hits(&b[1]);
  if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "this rank's rows %d..%d differ from the single-GPU reference in %lld elements of "
             "its first or last row and %lld further in, after %lld iterations (%d calls; some "
             "ranks start %.0f ms late each call) of a %d x %d grid on %d ranks. Index = global "
             "row x %d + column. Wrong edge rows come from a wrong halo: a row exchanged with the "
             "wrong neighbour, received after the stencil read it, or sent before the stream had "
             "computed it; they spread one row further in per iteration",
             l.row0, l.row0 + l.rows - 1, f.edge, f.inner, iters, kCalls, kDelayUs / 1000.0, ny,
             l.nx, l.world, l.nx);
  else if (f.boundary)
    snprintf(r.msg, sizeof r.msg,
             "%lld elements of the fixed boundary row%s changed on rank %d: it has no neighbour "
             "on that side (use MPI_PROC_NULL there), and nothing may be received into it",
             f.boundary, l.up < 0 && l.down < 0 ? "s" : "", l.rank);
  else if (f.unused)
    snprintf(r.msg, sizeof r.msg,
             "%lld elements of the unused rows of this rank's slabs were written (it owns %d rows, "
             "the slabs have room for %d): a halo row placed by another rank's row count?",
             f.unused, l.rows, l.max_rows);
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "a write landed outside this rank's slabs (in the guard bands)");
  mgpu_record_case(c->name, &r, f.boundary != 0 || f.unused != 0);

  ref_free(&ref);
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  mgpu_free(&b[1]);
  mgpu_free(&b[0]);
}

/* ---- performance --------------------------------------------------------------------------- */

typedef struct nccl_state {
  layout l;
  float *buf[2];
  ncclComm_t comm;
  long long iter;
} nccl_state;

/* The baseline's iteration: the halos of in by NCCL (one group), then the same stencil. */
static void baseline_iteration(nccl_state *a, cudaStream_t s) {
  const layout *l = &a->l;
  const size_t nx = (size_t)l->nx;
  float *in = a->buf[a->iter & 1], *out = a->buf[(a->iter + 1) & 1];
  MGPU_NCCL(ncclGroupStart());
  if (l->up >= 0) {
    MGPU_NCCL(ncclSend(in + nx, nx, ncclFloat, l->up, a->comm, s));
    MGPU_NCCL(ncclRecv(in, nx, ncclFloat, l->up, a->comm, s));
  }
  if (l->down >= 0) {
    MGPU_NCCL(ncclSend(in + (size_t)l->rows * nx, nx, ncclFloat, l->down, a->comm, s));
    MGPU_NCCL(ncclRecv(in + (size_t)(l->rows + 1) * nx, nx, ncclFloat, l->down, a->comm, s));
  }
  MGPU_NCCL(ncclGroupEnd());
  jac_stencil(in, out, l->nx, l->rows, s);
  a->iter++;
}

static void run_perf(mgpu_ctx *ctx, int pi, ncclComm_t nccl, MPI_Comm comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const int per_rank = c->n < 1 || c->n > 4096 ? 1 : (int)c->n;
  const layout l = make_layout(ctx, kPerfNx, per_rank * ctx->world);
  const uint64_t key = data_key(ctx, 1000 + pi);
  const int min_reps = ctx->min_reps > 0 ? ctx->min_reps : 5;
  int max_reps = ctx->max_reps > 0 ? ctx->max_reps : 30;
  const double budget_us = (ctx->perf_budget_ms > 0 ? ctx->perf_budget_ms : 20000.0) * 1e3 / ctx->nperf_cases;
  double yours_us[kMaxSamples], base_us[kMaxSamples], base_wall[kMaxSamples];
  mgpu_buf yb[2];
  float *slab[2];
  nccl_state ba;
  jac_grid g;
  long long yiter = 0;
  reference ref;
  mgpu_result r;
  findings f;
  cudaEvent_t e0, e1;
  double t0, one, start;
  char name[96];
  int iters, i, k, stop, pass;

  if (c->n < 1 || c->n > 4096)
    mgpu_fail("driver", "perf case", __FILE__, __LINE__, c->n, "rows per rank out of range");
  if (max_reps > kMaxSamples) max_reps = kMaxSamples;
  for (i = 0; i < 2; i++) {
    yb[i] = mgpu_alloc(slab_elems(&l) * sizeof(float), ctx->device);
    slab[i] = (float *)yb[i].ptr;
  }
  memset(&ba, 0, sizeof ba);
  ba.l = l;
  ba.comm = nccl;
  for (i = 0; i < 2; i++) MGPU_CUDA(cudaMalloc((void **)&ba.buf[i], slab_elems(&l) * sizeof(float)));
  fill_slabs(slab, &l, key, s);
  fill_slabs(ba.buf, &l, key, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  g = make_grid(&l, slab[0], slab[1], comm);
  MGPU_CUDA(cudaEventCreate(&e0));
  MGPU_CUDA(cudaEventCreate(&e1));

  /* Warm-up, then one timed iteration of yours sets the operations per sample. */
  for (i = 0; i < 2; i++) {
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    jacobi_run(&g, yiter, 1, s);
    yiter++;
    baseline_iteration(&ba, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
  }
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  t0 = mgpu_now_us();
  jacobi_run(&g, yiter, 1, s);
  yiter++;
  MGPU_CUDA(cudaStreamSynchronize(s));
  one = max_over_ranks(mgpu_now_us() - t0);
  iters = (int)ceil(kSampleUs / (one > 1 ? one : 1));
  if (iters < 1) iters = 1;
  if (iters > 1000) iters = 1000;

  start = mgpu_now_us();
  for (k = 0, stop = 0; !stop; k++) {
    float ms = 0;
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    t0 = mgpu_now_us();
    jacobi_run(&g, yiter, iters, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
    yours_us[k] = max_over_ranks((mgpu_now_us() - t0) / iters);
    yiter += iters;

    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    t0 = mgpu_now_us();
    MGPU_CUDA(cudaEventRecord(e0, s));
    for (i = 0; i < iters; i++) baseline_iteration(&ba, s);
    MGPU_CUDA(cudaEventRecord(e1, s));
    MGPU_CUDA(cudaStreamSynchronize(s));
    base_wall[k] = max_over_ranks((mgpu_now_us() - t0) / iters);
    MGPU_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    base_us[k] = max_over_ranks(ms * 1e3 / iters);

    stop = k + 1 >= max_reps || (k + 1 >= min_reps && mgpu_now_us() - start > budget_us);
    MGPU_MPI(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD));
  }
  mgpu_record_timing(c->name, "yours", 2.0 * l.nx * sizeof(float), 1.0, "time", yours_us, yours_us, k);
  mgpu_record_timing(c->name, "baseline", 2.0 * l.nx * sizeof(float), 1.0, "time", base_us, base_wall, k);
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (ctx->rank == 0) {
    mgpu_value("iterations timed (yours)", (double)yiter, "iterations");
    mgpu_value("iterations timed (baseline)", (double)ba.iter, "iterations");
  }

  /* Both timed runs must have computed the grid: one reference, advanced to the iteration count
   * of each in turn. */
  ref_init(&ref, &l, key, s);
  for (pass = 0; pass < 2; pass++) {
    const int yours = (pass == 0) == (yiter <= ba.iter);
    ref_advance(&ref, yours ? yiter : ba.iter, s);
    mgpu_result_init(&r, (long long)l.rows * l.nx);
    memset(&f, 0, sizeof f);
    if (yours) {
      compare_rows(slab[yiter & 1], &ref, &l, &r, &f);
      if (r.bad || r.unwritten)
        snprintf(r.msg, sizeof r.msg,
                 "the %lld iterations timed on the %d x %d grid (%d rows per rank) differ from the "
                 "single-GPU reference in %lld edge-row and %lld inner elements: right on the "
                 "small correctness grids, wrong on this one",
                 yiter, l.ny, l.nx, per_rank, f.edge, f.inner);
      snprintf(name, sizeof name, "timed-%s", c->name);
      mgpu_record_case(name, &r, 0);
    } else {
      compare_rows(ba.buf[ba.iter & 1], &ref, &l, &r, &f);
      if (r.bad || r.unwritten)
        mgpu_fail("driver", "NCCL baseline", __FILE__, __LINE__, r.bad + r.unwritten,
                  "the course's NCCL baseline computed a wrong grid (a bug in the course)");
    }
  }
  ref_free(&ref);
  MGPU_CUDA(cudaEventDestroy(e1));
  MGPU_CUDA(cudaEventDestroy(e0));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  for (i = 0; i < 2; i++) {
    MGPU_CUDA(cudaFree(ba.buf[i]));
    mgpu_free(&yb[i]);
  }
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  MPI_Comm comm;
  cudaStream_t stream;
  ncclUniqueId id;
  ncclComm_t nccl = NULL;
  int k;

  mgpu_init(&ctx, argc, argv); /* picks this rank's GPU before MPI_Init */
  start_mpi(&ctx, &argc, &argv, &comm);
  MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, k, comm, stream);
  if (ctx.perf) {
    mgpu_nccl_unique_id(&ctx, &id);
    MGPU_NCCL(ncclCommInitRank(&nccl, ctx.world, id, ctx.rank));
    for (k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, k, nccl, comm, stream);
    MGPU_NCCL(ncclCommDestroy(nccl));
  }

  MGPU_CUDA(cudaStreamDestroy(stream));
  MGPU_MPI(MPI_Comm_free(&comm));
  MGPU_MPI(MPI_Finalize());
  return mgpu_finish(&ctx);
}
